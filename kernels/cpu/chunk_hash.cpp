#include "kernels/cpu/chunk_hash.hpp"

#include <xxhash.h>

#include <algorithm>
#include <vector>

namespace meridian::kernels {

std::vector<std::uint64_t> chunk_hashes(const void* data, std::size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  const std::size_t chunks = (size + kHashChunkBytes - 1) / kHashChunkBytes;
  std::vector<std::uint64_t> hashes(chunks);
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < chunks; ++i) {
    const std::size_t start = i * kHashChunkBytes;
    hashes[i] = XXH64(bytes + start, std::min(kHashChunkBytes, size - start), 0);
  }
  return hashes;
}

std::uint64_t combine_chunk_hashes(const std::vector<std::uint64_t>& hashes) {
  return XXH3_64bits(hashes.data(), hashes.size() * sizeof(std::uint64_t));
}

std::uint64_t chunked_hash64(const void* data, std::size_t size) {
  return combine_chunk_hashes(chunk_hashes(data, size));
}

}  // namespace meridian::kernels
