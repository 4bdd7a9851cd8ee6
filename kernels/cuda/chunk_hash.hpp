#pragma once
// The fingerprint of kernels/cpu/chunk_hash.hpp computed on the device: one thread per 4 KiB
// chunk runs XXH64 over it; the chunk hashes come back to the host (8 bytes per 4 KiB) and are
// combined there with the xxHash library's XXH3. Equal to kernels::chunked_hash64 of the same
// bytes. Waits for the stream.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace meridian::kernels::cuda {

// data: device memory, 8-byte aligned (any cudaMalloc'd buffer, or an offset into one that is a
// multiple of 8).
std::uint64_t chunked_hash64(const void* data, std::size_t size, cudaStream_t stream);

}  // namespace meridian::kernels::cuda
