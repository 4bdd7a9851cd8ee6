#pragma once
// A 64-bit fingerprint of a byte buffer that a GPU computes in parallel and a CPU reproduces bit
// for bit (the parameter hash of the SDC guard when replicas train on GPUs):
//   chunk i = bytes [i*kHashChunkBytes, (i+1)*kHashChunkBytes) (the last one shorter),
//   h_i     = XXH64(chunk i, seed 0),
//   hash    = XXH3_64bits(h_0 | h_1 | ... as little-endian u64), and XXH3_64bits("") for no bytes.
// XXH3 itself is a sequential chain of 1 KiB blocks and does not spread over thousands of
// threads; XXH64 per 4 KiB chunk does, and both halves are the xxHash library's on the CPU.
#include <cstddef>
#include <cstdint>

namespace meridian::kernels {

inline constexpr std::size_t kHashChunkBytes = 4096;

std::uint64_t chunked_hash64(const void* data, std::size_t size);

}  // namespace meridian::kernels
