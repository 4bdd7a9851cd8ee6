#include <xxhash.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/chunk_hash.hpp"
#include "kernels/cuda/chunk_hash.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/xxh64.hpp"

namespace meridian::kernels::cuda {
namespace {

__global__ void chunk_hash_kernel(std::uint64_t* hashes, const unsigned char* data, std::size_t size,
                                  std::size_t chunks) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= chunks) return;
  const std::size_t start = i * kHashChunkBytes;
  hashes[i] = xxh64(data + start, size - start < kHashChunkBytes ? size - start : kHashChunkBytes, 0);
}

constexpr unsigned kThreads = 128;

}  // namespace

std::uint64_t chunked_hash64(const void* data, std::size_t size, cudaStream_t stream) {
  if (reinterpret_cast<std::uintptr_t>(data) % 8 != 0)
    throw CudaError("chunked_hash64: device data must be 8-byte aligned");
  const std::size_t chunks = (size + kHashChunkBytes - 1) / kHashChunkBytes;
  std::vector<std::uint64_t> hashes(chunks);
  if (chunks > 0) {
    StreamScratch<std::uint64_t> device_hashes(chunks, stream);
    chunk_hash_kernel<<<grid_for(chunks, kThreads), kThreads, 0, stream>>>(
        device_hashes.data(), static_cast<const unsigned char*>(data), size, chunks);
    MERIDIAN_CUDA_LAUNCHED();
    MERIDIAN_CUDA(cudaMemcpyAsync(hashes.data(), device_hashes.data(), chunks * sizeof(std::uint64_t),
                                  cudaMemcpyDeviceToHost, stream));
    MERIDIAN_CUDA(cudaStreamSynchronize(stream));
  }
  return XXH3_64bits(hashes.data(), hashes.size() * sizeof(std::uint64_t));
}

}  // namespace meridian::kernels::cuda
