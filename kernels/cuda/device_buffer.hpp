#pragma once
// Owning device allocations. DeviceBuffer is synchronous (cudaMalloc/cudaFree) and for long-lived
// buffers; StreamScratch is stream-ordered (cudaMallocAsync/cudaFreeAsync) and for a kernel's
// temporary storage, which the driver's pool recycles without a device-wide synchronisation.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_check.hpp"

namespace meridian::kernels::cuda {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) : n_(n) {
    if (n > 0) MERIDIAN_CUDA(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() {
    if (p_ != nullptr) cudaFree(p_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* data() { return p_; }
  const T* data() const { return p_; }
  std::size_t size() const { return n_; }

  void upload(const std::vector<T>& host) {
    if (host.size() != n_) throw CudaError("DeviceBuffer::upload: size mismatch");
    if (n_ > 0) MERIDIAN_CUDA(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    if (n_ > 0) MERIDIAN_CUDA(cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  void zero() {
    if (n_ > 0) MERIDIAN_CUDA(cudaMemset(p_, 0, n_ * sizeof(T)));
  }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

template <class T>
class StreamScratch {
 public:
  StreamScratch(std::size_t n, cudaStream_t stream) : stream_(stream) {
    if (n > 0) MERIDIAN_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&p_), n * sizeof(T), stream));
  }
  ~StreamScratch() {
    if (p_ != nullptr) cudaFreeAsync(p_, stream_);
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  T* data() { return p_; }

 private:
  T* p_ = nullptr;
  cudaStream_t stream_;
};

}  // namespace meridian::kernels::cuda
