#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <type_traits>

#include "core/device/cuda_probe.hpp"
#include "core/model/cuda_gpt.hpp"
#include "core/model/cuda_llama.hpp"
#include "core/model/param_layout.hpp"
#include "core/optim/cuda_adamw.hpp"
#include "core/optim/loss_scale.hpp"
#include "core/train/device_step.hpp"
#include "core/util/error.hpp"
#include "kernels/cuda/chunk_hash.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/elementwise.hpp"
#include "kernels/cuda/phase_timer.hpp"

namespace meridian {
namespace {

// Model: CudaGpt<T> or CudaLlama<T>, T its compute type (float; __nv_bfloat16 or __half for
// mixed precision, the latter with dynamic loss scaling).
template <template <class> class Model, class T>
class CudaStep final : public DeviceStep {
 public:
  CudaStep(const ModelConfig& shape, const AdamWOptions& options, CudaAttention attention, const ComputeDevice& device)
      : model_(shape, nullptr, attention, device.logits_align),
        opt_(model_.layout(), options, model_.stream()),
        loss_gradient_in_forward_(device.loss_gradient_in_forward) {
    model_.set_bias_epilogue(device.bias_epilogue);
    if constexpr (std::is_same_v<T, __half>) scaler_.emplace(device.loss_scale);
  }

  std::string attention() const override { return model_.attention(); }
  void reserve(int B) override { model_.reserve(B); }

  void upload_params(std::span<const float> host) override { model_.upload_params(host); }
  void download_params(std::span<float> host) const override { copy_out(model_.download_params(), host, "params"); }

  void upload_moments(std::span<const float> m, std::span<const float> v, std::int64_t steps) override {
    opt_.upload_moments(m, v, steps);
  }
  std::int64_t download_moments(std::span<float> m, std::span<float> v) const override {
    copy_out(opt_.download_m(), m, "first moment");
    copy_out(opt_.download_v(), v, "second moment");
    return opt_.steps_taken();
  }

  void upload_grads(std::span<const float> host) override {
    MERIDIAN_CHECK(host.size() == model_.size(), "grads of ", host.size(), " values for ", model_.size());
    MERIDIAN_CUDA(cudaMemcpyAsync(model_.grads(), host.data(), host.size_bytes(), cudaMemcpyHostToDevice,
                                  model_.stream()));
  }
  void download_grads(std::span<float> host) const override {
    copy_out(model_.download_grads(), host, "grads");
  }

  void zero_grads() override { model_.zero_grads(); }

  float forward_backward(const std::int32_t* inputs, const std::int32_t* targets, int B, float grad_scale) override {
    const float scale = scaler_ ? grad_scale * scaler_->scale() : grad_scale;
    const float loss =
        model_.forward(inputs, targets, B, loss_gradient_in_forward_ ? std::optional(scale) : std::nullopt);
    model_.backward(scale);
    return loss;
  }
  float loss(const std::int32_t* inputs, const std::int32_t* targets, int B) override {
    return model_.forward(inputs, targets, B);
  }

  std::optional<double> clip(double max_norm) override {
    kernels::cuda::mark(timer_.get(), "gradient norm and clip");
    const auto norm = clipped(max_norm);
    kernels::cuda::mark(timer_.get(), nullptr);
    return norm;
  }

  LossScaler* loss_scaler() override { return scaler_ ? &*scaler_ : nullptr; }

  void adamw(float lr) override {
    kernels::cuda::mark(timer_.get(), "AdamW");
    opt_.step(model_.params(), model_.grads(), lr, model_.weight_copy());
    kernels::cuda::mark(timer_.get(), nullptr);
  }

  std::uint64_t params_hash() override {
    return kernels::cuda::chunked_hash64(model_.params(), model_.size() * sizeof(float), model_.stream());
  }

  void time_phases(bool on) override {
    timer_ = on ? std::make_unique<kernels::cuda::PhaseTimer>(model_.stream()) : nullptr;
    model_.time_phases(timer_.get());
  }
  std::map<std::string, double> take_phase_ms() override {
    std::map<std::string, double> ms;
    if (timer_) timer_->collect(ms);
    return ms;
  }

 private:
  std::optional<double> clipped(double max_norm) {
    if (scaler_) {
      const bool finite = kernels::cuda::unscale_gradients(model_.grads(), model_.size(), 1.0f / scaler_->scale(),
                                                           model_.stream());
      scaler_->update(!finite);
      if (!finite) return std::nullopt;
    }
    const double norm = std::sqrt(kernels::cuda::sum_squares(model_.grads(), model_.size(), model_.stream()));
    if (max_norm > 0 && std::isfinite(norm) && norm > max_norm)
      kernels::cuda::scale(model_.grads(), model_.size(), static_cast<float>(max_norm / (norm + 1e-6)),
                           model_.stream());
    return norm;
  }

  static void copy_out(const std::vector<float>& from, std::span<float> to, const char* what) {
    MERIDIAN_CHECK(from.size() == to.size(), what, ": ", from.size(), " values on the device for ", to.size(),
                   " on the host");
    std::copy(from.begin(), from.end(), to.begin());
  }

  Model<T> model_;
  CudaAdamW opt_;
  bool loss_gradient_in_forward_;
  std::optional<LossScaler> scaler_;  // fp16 only
  std::unique_ptr<kernels::cuda::PhaseTimer> timer_;  // while phases are timed
};

template <template <class> class Model>
std::unique_ptr<DeviceStep> make_step(const ModelConfig& shape, const AdamWOptions& options, CudaAttention attention,
                                      const ComputeDevice& device) {
  switch (device.precision) {
    case JobConfig::Site::Precision::Bf16:
      return std::make_unique<CudaStep<Model, __nv_bfloat16>>(shape, options, attention, device);
    case JobConfig::Site::Precision::Fp16:
      return std::make_unique<CudaStep<Model, __half>>(shape, options, attention, device);
    case JobConfig::Site::Precision::Fp32: break;
  }
  return std::make_unique<CudaStep<Model, float>>(shape, options, attention, device);
}

}  // namespace

std::unique_ptr<DeviceStep> make_cuda_step(const ModelConfig& shape, const AdamWOptions& options,
                                           const ComputeDevice& device) {
  const auto attention = device.attention == JobConfig::Site::Attention::Tiled   ? CudaAttention::Tiled
                         : device.attention == JobConfig::Site::Attention::Cudnn ? CudaAttention::Cudnn
                                                                                 : CudaAttention::Materialized;
  if (shape.family == ModelFamily::Llama && attention == CudaAttention::Tiled)
    throw make_error(ErrorKind::Config,
                     "attention = \"tiled\" runs GPT-2's multi-head attention only; a Llama's "
                     "grouped-query attention on a GPU is \"materialized\" or \"cudnn\"");
  // Weights, gradients and the two moments in fp32 must fit before the first activation; the
  // probe also makes the device this thread's current device, where everything below allocates.
  require_cuda_device(device.index, 4 * sizeof(float) * ParamLayout::of(shape).total());
  if (shape.family == ModelFamily::Llama) return make_step<CudaLlama>(shape, options, attention, device);
  return make_step<CudaGpt>(shape, options, attention, device);
}

}  // namespace meridian
