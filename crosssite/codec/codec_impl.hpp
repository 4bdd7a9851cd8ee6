#pragma once
// Internal to the codec library: what codec.cpp shares with block_codecs.cpp.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

namespace meridian {

// Elements per unit of parallel work, and the size below which threads cost more than they save.
inline constexpr std::size_t kChunk = 4096;
inline constexpr std::size_t kParallelMin = 1 << 16;

inline constexpr std::uint32_t kAbsMask = 0x7FFFFFFFu, kExpMask = 0x7F800000u;

// Index of the first non-finite value (x.size() if none); used only once a scan has found one,
// so that the parallel scans stay a branch-free max over the bit patterns.
inline std::size_t first_non_finite(std::span<const float> x) {
  std::size_t i = 0;
  while (i < x.size() && (std::bit_cast<std::uint32_t>(x[i]) & kExpMask) != kExpMask) ++i;
  return i;
}

// Bits = 8 or 4. out/in point just past the header: the block scales, then the packed values.
template <int Bits>
void encode_blockwise(std::span<const float> x, std::size_t block, std::byte* out);
template <int Bits>
void decode_blockwise(const std::byte* in, std::size_t block, std::span<float> y);

// The sparse codec (sparse_codec.cpp): bytes of one block of `len` values, of n values, and the
// payloads (out/in point just past the header).
std::size_t sparse_block_bytes(std::size_t len, std::size_t keep);
std::size_t sparse_size(std::size_t n, std::size_t block, std::size_t keep);
void encode_sparse(std::span<const float> x, std::size_t block, std::size_t keep, std::byte* out);
void decode_sparse(const std::byte* in, std::size_t block, std::size_t keep, std::span<float> y);

}  // namespace meridian
