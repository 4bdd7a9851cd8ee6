#pragma once
// What every model on one CUDA device holds beside its activations: the flat fp32 master weights
// and gradients in the family's ParamLayout (so all-reduce, hashing, deltas, checkpoints and export
// read them unchanged once downloaded) and, under mixed precision, the 16-bit copy of the weights
// that the products read. T is the compute type: float (no copy), __nv_bfloat16 or __half.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <span>
#include <type_traits>
#include <vector>

#include "core/util/error.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/elementwise.hpp"

namespace meridian {

// The stride of the logits' rows: the vocabulary rounded up to `align` elements (64: 50,257 ->
// 50,304), so that every row starts 16-byte aligned and cuBLAS takes its aligned kernels for the
// output layer; the padding columns are never written or read. align 1: no padding.
inline int logits_stride(int vocab, int align) { return (vocab + align - 1) / align * align; }

template <class T>
class CudaWeights {
 public:
  // The 16-bit copy's type (bf16 for T = float, where there is none).
  using Copy = std::conditional_t<std::is_same_v<T, float>, __nv_bfloat16, T>;

  CudaWeights(std::size_t size, cudaStream_t stream) : stream_(stream), params_(size), grads_(size) {
    params_.zero();
    grads_.zero();
    if constexpr (!std::is_same_v<T, float>) copy_ = kernels::cuda::DeviceBuffer<Copy>(size);
    refresh_copy();
  }

  std::size_t size() const { return params_.size(); }
  float* params() { return params_.data(); }
  float* grads() { return grads_.data(); }
  // What the products read: the fp32 weights, or their 16-bit copy.
  const T* weights() const {
    if constexpr (std::is_same_v<T, float>) return params_.data();
    else return copy_.data();
  }
  Copy* copy() { return copy_.size() > 0 ? copy_.data() : nullptr; }

  void upload(std::span<const float> host) {
    MERIDIAN_CHECK(host.size() == size(), "params of ", host.size(), " values for ", size());
    MERIDIAN_CUDA(cudaMemcpy(params_.data(), host.data(), host.size_bytes(), cudaMemcpyHostToDevice));
    refresh_copy();
  }
  std::vector<float> download_params() const {
    MERIDIAN_CUDA(cudaStreamSynchronize(stream_));
    return params_.download();
  }
  std::vector<float> download_grads() const {
    MERIDIAN_CUDA(cudaStreamSynchronize(stream_));
    return grads_.download();
  }
  // Re-derives the 16-bit copy after the weights changed by other means (no-op for float).
  void refresh_copy() {
    if constexpr (std::is_same_v<T, __nv_bfloat16>)
      kernels::cuda::round_to_bf16(copy_.data(), params_.data(), size(), stream_);
    if constexpr (std::is_same_v<T, __half>) kernels::cuda::round_to_f16(copy_.data(), params_.data(), size(), stream_);
  }
  void zero_grads() { MERIDIAN_CUDA(cudaMemsetAsync(grads_.data(), 0, size() * sizeof(float), stream_)); }

 private:
  cudaStream_t stream_;
  kernels::cuda::DeviceBuffer<float> params_, grads_;
  kernels::cuda::DeviceBuffer<Copy> copy_;  // empty for T = float
};

}  // namespace meridian
