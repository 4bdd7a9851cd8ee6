#pragma once
// The attention kernel a model on the device runs, and what each layer keeps for its backward:
// the (T, T) probabilities of every head (materialized: cuBLAS products around a fused softmax,
// kernels/cuda/attention.hpp), or one log-sum-exp per query row (the tiled kernel,
// kernels/cuda/attention_tiled.hpp, O(T) memory and multi-head only; cuDNN's flash attention,
// kernels/cuda/attention_cudnn.hpp, bf16 and fp16 only). Asked for cuDNN where it cannot run
// (library missing, fp32, a shape it refuses), a model runs the materialized kernel and
// describe() says why, for the start-up line. cuDNN's graphs are per batch size: one it refuses
// at a later batch size switches the model to the materialized kernel there (prepare), so a
// micro-batch that cuDNN will not take costs speed, never the run.
#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "kernels/cuda/attention_cudnn.hpp"
#include "kernels/cuda/gemm.hpp"

namespace meridian {

enum class CudaAttention { Materialized, Tiled, Cudnn };

template <class T>
class DeviceAttention {
 public:
  // Multi-head when KV == NH; Tiled needs it.
  DeviceAttention(CudaAttention asked, kernels::cuda::Blas& blas, cudaStream_t stream, int Tn, int NH, int KV, int hs);

  CudaAttention kind() const { return kind_; }
  std::string describe() const;
  // Per layer and position: NH * T probabilities of type T (materialized), else NH floats.
  bool keeps_probabilities() const { return kind_ == CudaAttention::Materialized; }
  // Before a forward at batch size B: true when cuDNN refused B and the materialized kernel runs
  // from now on (what is kept per layer changed: the caller reallocates), else false.
  bool prepare(int B);

  // probs or lse: this layer's slice of what keeps_probabilities() says is kept (the other null).
  void forward(T* out, T* probs, float* lse, const T* qkv, int B);
  // dqkv is overwritten.
  void backward(T* dqkv, const T* dout, const T* out, const T* qkv, const T* probs, const float* lse, int B);

 private:
  kernels::cuda::AttentionShape shape(int B) const { return {B, Tn_, NH_, KV_, hs_}; }

  CudaAttention kind_;
  kernels::cuda::Blas& blas_;
  cudaStream_t stream_;
  int Tn_, NH_, KV_, hs_;
  std::unique_ptr<kernels::cuda::CudnnAttention> cudnn_;
  std::string description_;
};

}  // namespace meridian
