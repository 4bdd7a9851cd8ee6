#pragma once
// The part of a training step that runs on a GPU. The Trainer keeps what every backend shares
// (data, schedule, the group's reduce, the divergence guard, checkpoints) and a host copy of the
// weights and AdamW moments that the layers above read and write; a DeviceStep holds the weights,
// gradients and moments on one GPU (core/model/cuda_gpt, core/optim/cuda_adamw), in the same flat
// ParamLayout, and runs forward, backward, clipping and AdamW there. The CPU needs none of this:
// the Trainer runs Gpt<float>, the reference, itself.
//
// No CUDA type appears here, so the Trainer compiles the same with and without the backend.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "core/config/job_config.hpp"
#include "core/model/model_config.hpp"
#include "core/optim/adamw.hpp"
#include "core/optim/loss_scale.hpp"

namespace meridian {

// Where a trainer computes: the CPU (the reference) or one GPU of the machine, and how.
struct ComputeDevice {
  JobConfig::Site::Device kind = JobConfig::Site::Device::Cpu;
  JobConfig::Site::Precision precision = JobConfig::Site::Precision::Fp32;
  JobConfig::Site::Attention attention = JobConfig::Site::Attention::Materialized;
  int index = 0;  // the CUDA device
  LossScaleOptions loss_scale{};  // fp16 only: the dynamic loss scaler's start and bounds
  // The logits rows' stride: the vocabulary rounded up to this (core/model/cuda_weights.hpp,
  // logits_stride); 1 for none, bench_gpu's way to measure what the alignment buys.
  int logits_align = 64;
  // The step's fusions, on unless bench_gpu measures what each buys: the bias in cuBLASLt's
  // epilogue (kernels/cuda/gemm.hpp, gemm_bias), the logits' gradient written in the loss's pass
  // (core/model/cuda_loss.hpp).
  bool bias_epilogue = true;
  bool loss_gradient_in_forward = true;
};

class DeviceStep {
 public:
  virtual ~DeviceStep() = default;

  // The attention kernel that runs, and why where it is not the one asked for (the start-up line).
  virtual std::string attention() const = 0;
  // Makes room on the device for micro-batches of B sequences and settles the attention kernel
  // for B (cuDNN may refuse a batch size it took at B = 1), before attention() is reported.
  virtual void reserve(int B) = 0;

  // Host <-> device, in the flat ParamLayout. Downloads wait for the device's queued work.
  virtual void upload_params(std::span<const float> host) = 0;
  virtual void download_params(std::span<float> host) const = 0;
  virtual void upload_moments(std::span<const float> m, std::span<const float> v, std::int64_t steps) = 0;
  // Returns AdamW's step count, which goes with the moments.
  virtual std::int64_t download_moments(std::span<float> m, std::span<float> v) const = 0;
  virtual void upload_grads(std::span<const float> host) = 0;
  virtual void download_grads(std::span<float> host) const = 0;

  virtual void zero_grads() = 0;
  // Forward of one micro-batch (B sequences of seq_len host tokens) and its backward, adding
  // grad_scale * d(mean loss)/d(params) to the gradients; returns the batch's mean loss.
  virtual float forward_backward(const std::int32_t* inputs, const std::int32_t* targets, int B,
                                 float grad_scale) = 0;
  // Forward only: the batch's mean loss (evaluation).
  virtual float loss(const std::int32_t* inputs, const std::int32_t* targets, int B) = 0;
  // The gradients' L2 norm; above max_norm (> 0) they are scaled to it: clip_grad_norm's rule.
  // Under fp16 loss scaling the gradients are first unscaled and checked: none (and the scale
  // backs off) when they overflowed, and the step must then be skipped.
  virtual std::optional<double> clip(double max_norm) = 0;
  // fp16: the dynamic loss scaler (null without loss scaling), part of the training state that
  // checkpoints keep; the divergence guard watches its scale fall (core/train/divergence_detector).
  virtual LossScaler* loss_scaler() = 0;
  virtual void adamw(float lr) = 0;
  // kernels::chunked_hash64 of the weights, computed where they are (8 bytes per 4 KiB come back).
  virtual std::uint64_t params_hash() = 0;

  // Where the device time of the steps goes (bench_gpu's table): with timing on, each kernel group
  // of forward and backward, the gradient norm and clip, and AdamW is timed by CUDA events;
  // take_phase_ms() returns the milliseconds per group since the last take and starts again.
  virtual void time_phases(bool on) = 0;
  virtual std::map<std::string, double> take_phase_ms() = 0;
};

// A step of model `shape` with AdamW `options` on `device` (a CUDA one), in its precision (fp16
// with dynamic loss scaling at LossScaleOptions' defaults) and attention kernel.
// DeviceError when this meridian was built without the CUDA backend or the device is unusable.
std::unique_ptr<DeviceStep> make_cuda_step(const ModelConfig& shape, const AdamWOptions& options,
                                           const ComputeDevice& device);

}  // namespace meridian
