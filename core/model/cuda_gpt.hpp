#pragma once
// Gpt on one CUDA device: the model of core/model/gpt.hpp, layer for layer, on the kernels of
// kernels/cuda. Parameters, gradients (and the optimizer's moments, core/optim/cuda_adamw.hpp)
// are flat fp32 device buffers in the same ParamLayout as on the CPU (core/model/cuda_weights.hpp).
// T is the compute type: float (fp32 throughout: the reference path), or __nv_bfloat16 / __half
// (mixed precision: 16-bit activations and a 16-bit copy of the weights that the matmuls read,
// fp32 master weights, fp32 gradients accumulated by cuBLAS in fp32). fp16's narrow exponent
// range needs loss scaling (core/optim/loss_scale.hpp; core/train/cuda_step.cpp applies it).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "core/model/cuda_attention.hpp"
#include "core/model/cuda_weights.hpp"
#include "core/model/model_config.hpp"
#include "core/model/param_layout.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/phase_timer.hpp"

namespace meridian {

template <class T>
class CudaGpt {
 public:
  // logits_align: the logits rows' stride is the vocabulary rounded up to it (logits_stride).
  explicit CudaGpt(const ModelConfig& config, cudaStream_t stream = nullptr,
                   CudaAttention attention = CudaAttention::Materialized, int logits_align = 64);

  const ModelConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  cudaStream_t stream() const { return stream_; }
  std::string attention() const { return attention_.describe(); }  // the kernel that runs, and why
  // Off: products add their bias by the plain path, not cuBLASLt's epilogue (bench_gpu's comparison).
  void set_bias_epilogue(bool on) { blas_.bias_epilogue = on; }
  std::size_t size() const { return layout_.total(); }
  float* params() { return weights_.params(); }  // device, fp32 master weights
  float* grads() { return weights_.grads(); }    // device, fp32
  // The 16-bit copy of the weights (null for T = float), for an optimizer that writes it in its pass.
  using Copy = typename CudaWeights<T>::Copy;
  Copy* weight_copy() { return weights_.copy(); }

  void upload_params(std::span<const float> host) { weights_.upload(host); }
  std::vector<float> download_params() const { return weights_.download_params(); }
  std::vector<float> download_grads() const { return weights_.download_grads(); }
  // Re-derives the bf16 weight copy after params() changed by other means (no-op for float).
  void refresh_weight_copy() { weights_.refresh_copy(); }

  // As Gpt::forward: host tokens, B sequences of seq_len; the mean loss (0 without targets).
  // With backward_scale (training), the loss's pass over the logits also writes their gradient at
  // that scale, and backward(backward_scale) starts from it (core/model/cuda_loss.hpp).
  float forward(const std::int32_t* inputs, const std::int32_t* targets, int B,
                std::optional<float> backward_scale = std::nullopt);
  // As Gpt::backward: adds loss_scale * d(mean loss)/d(params) to grads().
  void backward(float loss_scale = 1.0f);
  void zero_grads() { weights_.zero_grads(); }
  // Allocates the activations of B sequences (forward grows them as needed) and settles the
  // attention kernel for B: an out-of-memory error, or cuDNN refusing B, at start-up, not at the
  // first step.
  void reserve(int B);
  // Marks each kernel group of forward and backward on `timer` (null: none, the default).
  void time_phases(kernels::cuda::PhaseTimer* timer) { phases_ = timer; }

 private:
  template <class U>
  using Buf = kernels::cuda::DeviceBuffer<U>;
  struct Activations {
    Buf<T> encoded, ln1, qkv, atty, att, attproj, res2, ln2, fch, fch_gelu, fcproj, res3, lnf, logits;
    Buf<float> ln1_mean, ln1_rstd, ln2_mean, ln2_rstd, lnf_mean, lnf_rstd, losses;
    Buf<float> lse;  // attention that keeps no probabilities: (L, B, NH, T) log-sum-exps, instead of att
    Buf<T> dres, dln, dqkv, datty, dfch, dfch_gelu;
  };

  ModelConfig config_;
  ParamLayout layout_;
  cudaStream_t stream_;
  int logits_ld_;
  kernels::cuda::Blas blas_;
  DeviceAttention<T> attention_;
  GptOffsets off_;
  CudaWeights<T> weights_;
  Activations acts_;
  Buf<std::int32_t> inputs_, targets_;
  std::vector<float> host_losses_;
  kernels::cuda::PhaseTimer* phases_ = nullptr;
  int capacity_ = 0, B_ = 0;
  bool have_targets_ = false;
  std::optional<float> logits_grad_scale_;  // the forward wrote the logits' gradient, at this scale
};

extern template class CudaGpt<float>;
extern template class CudaGpt<__nv_bfloat16>;
extern template class CudaGpt<__half>;

}  // namespace meridian
