#pragma once
// A 64-bit fingerprint of a byte buffer that a GPU computes in parallel and a CPU reproduces bit
// for bit (the parameter hash of the SDC guard when replicas train on GPUs):
//   chunk i = bytes [i*kHashChunkBytes, (i+1)*kHashChunkBytes) (the last one shorter),
//   h_i     = XXH64(chunk i, seed 0),
//   hash    = XXH3_64bits(h_0 | h_1 | ... as little-endian u64), and XXH3_64bits("") for no bytes.
// XXH3 itself is a sequential chain of 1 KiB blocks and does not spread over thousands of
// threads; XXH64 per 4 KiB chunk does, and both halves are the xxHash library's on the CPU.
// The same split lets owners of parts of a buffer hash it together: a part that begins at a chunk
// boundary has the buffer's chunk hashes for its chunks, and the parts' lists, put end to end in
// buffer order, combine to the whole buffer's hash (the commit hash of a site whose replicas each
// hold a part of the outer weights equals an unsharded site's).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace meridian::kernels {

inline constexpr std::size_t kHashChunkBytes = 4096;

std::uint64_t chunked_hash64(const void* data, std::size_t size);
// h_0, h_1, ... of `size` bytes.
std::vector<std::uint64_t> chunk_hashes(const void* data, std::size_t size);
// XXH3_64bits over the list: chunked_hash64 of the bytes the list was taken from.
std::uint64_t combine_chunk_hashes(const std::vector<std::uint64_t>& hashes);

}  // namespace meridian::kernels
