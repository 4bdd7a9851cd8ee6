// A whole training step on the GPU against the CPU's, on the same batch and weights, for GPT-2
// (CudaGpt) and Llama (CudaLlama: grouped-query and untied, tied with Qwen 2's biases, multi-head): forward
// loss, every gradient, and the loss after AdamW steps (fp32, and bf16 and fp16 mixed precision),
// with the materialising attention and with cuDNN's (where the library is found).
// Skipped, with a message, without a CUDA device.
#include <cuda_bf16.h>
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "core/model/cuda_gpt.hpp"
#include "core/model/cuda_llama.hpp"
#include "core/model/language_model.hpp"
#include "core/optim/adamw.hpp"
#include "core/optim/cuda_adamw.hpp"
#include "tests/support/cuda_parity.hpp"

using namespace meridian;
using meridian::testing::have_gpu;
using meridian::testing::random_tokens;

namespace {

// 2 layers, 4 heads, 64 channels, context 32, bytes: big enough for every kernel's loops to wrap.
ModelConfig gpt_shape() { return ModelConfig{2, 4, 64, 32, 256}; }
ModelConfig llama_shape(bool tied, bool qkv_bias) {
  ModelConfig c{2, 4, 64, 32, 256, ModelFamily::Llama};
  c.n_kv_head = 2;
  c.ffn_hidden = 96;
  c.tied = tied;
  c.qkv_bias = qkv_bias;
  return c;
}
constexpr int kBatch = 4;
constexpr float kLr = 1e-3f;

struct Batch {
  std::vector<std::int32_t> inputs, targets;
};

Batch batch(const ModelConfig& shape, std::uint64_t seed) {
  const std::size_t n = static_cast<std::size_t>(kBatch) * shape.seq_len;
  return {random_tokens(n, shape.vocab, seed), random_tokens(n, shape.vocab, seed + 1)};
}

// Losses of `steps` training steps, each on its own batch; `update` applies the optimizer.
template <class Model, class Update>
std::vector<float> train_steps(const ModelConfig& shape, Model& model, int steps, const Update& update) {
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s) {
    const auto b = batch(shape, 100 + s);
    model.zero_grads();
    losses.push_back(model.forward(b.inputs.data(), b.targets.data(), kBatch));
    model.backward(1.0f);
    update();
  }
  return losses;
}

// Bounds on the GPU's results relative to the CPU's: the first step's loss and gradients, the
// losses of the steps after it, and the first moment at the end; `tensor_grads` (0: not checked)
// bounds each tensor's gradient against its own largest.
struct Tolerances {
  double loss, grads, later_losses, moment, tensor_grads = 0;
};

// The worst tensor's error, each against its own scale: an error confined to a tensor whose
// gradients are small at initialisation (queries and keys, while attention is nearly uniform)
// hides under the whole vector's scale. The element type only changes the roundings, so the fp32
// cases carry this check for every precision.
void check_each_tensor(const ParamLayout& layout, const std::vector<float>& got, std::span<const float> want,
                       double tolerance) {
  double worst = 0;
  std::string which;
  for (const auto& view : layout.views()) {
    const auto part = [&](auto&& all) {
      return std::vector<float>(all.begin() + view.offset, all.begin() + view.offset + view.numel);
    };
    const double err = meridian::testing::rel_err(part(got), part(want));
    if (err >= worst) worst = err, which = view.name;
  }
  std::printf("parity %s:%d each tensor's gradient (worst: %s) err %.3e tol %.1e\n",
              meridian::testing::file_name(__FILE__), __LINE__, which.c_str(), worst, tolerance);
  CHECK_MESSAGE(worst <= tolerance, which, "'s gradient vs the CPU: relative error ", worst);
}

template <template <class> class GpuModel, class T>
void check_against_cpu(const ModelConfig& shape, std::uint64_t seed, int steps, const Tolerances& tol,
                       CudaAttention attention = CudaAttention::Materialized) {
  const auto cpu_model = make_model<float>(shape);
  LanguageModel<float>& cpu = *cpu_model;
  cpu.init_weights(seed);
  GpuModel<T> gpu(shape, nullptr, attention);
  MESSAGE("attention: " << gpu.attention());
  if (attention == CudaAttention::Cudnn && gpu.attention().rfind("cuDNN", 0) != 0) {
    MESSAGE("skipped: cuDNN's attention does not run here");
    return;
  }
  gpu.upload_params(cpu.params());
  CHECK(gpu.download_params() == std::vector<float>(cpu.params().begin(), cpu.params().end()));  // fp32 master

  const auto b = batch(shape, seed);
  cpu.zero_grads();
  gpu.zero_grads();
  const float cpu_loss = cpu.forward(b.inputs.data(), b.targets.data(), kBatch);
  const float gpu_loss = gpu.forward(b.inputs.data(), b.targets.data(), kBatch);
  CHECK(gpu_loss == doctest::Approx(cpu_loss).epsilon(tol.loss));
  cpu.backward(1.0f);
  gpu.backward(1.0f);
  const auto gpu_grads = gpu.download_grads();
  CHECK_CLOSE(gpu_grads, cpu.grads(), tol.grads);
  if (tol.tensor_grads > 0) check_each_tensor(cpu.layout(), gpu_grads, cpu.grads(), tol.tensor_grads);

  AdamW cpu_opt(cpu.layout(), AdamWOptions{});
  CudaAdamW gpu_opt(gpu.layout(), AdamWOptions{});
  const auto cpu_losses = train_steps(shape, cpu, steps, [&] { cpu_opt.step(cpu.params(), cpu.grads(), kLr); });
  const auto gpu_losses =
      train_steps(shape, gpu, steps, [&] { gpu_opt.step(gpu.params(), gpu.grads(), kLr, gpu.weight_copy()); });
  for (int s = 0; s < steps; ++s) CHECK(gpu_losses[s] == doctest::Approx(cpu_losses[s]).epsilon(tol.later_losses));
  // The first moment is linear in the gradients. The weights are not compared element by element:
  // Adam's first steps move each weight by about lr whatever its gradient's size, so a gradient
  // within rounding of zero may move it either way on either side.
  CHECK_CLOSE(gpu_opt.download_m(), cpu_opt.m(), tol.moment);
}

}  // namespace

TEST_CASE("fp32: one step's loss and gradients match the CPU, and so do the losses of the next steps") {
  if (!have_gpu()) return;
  check_against_cpu<CudaGpt, float>(gpt_shape(), 11, 5, {1e-5, 1e-4, 1e-4, 1e-3, 1e-3});
}

TEST_CASE("bf16 mixed precision: the loss and gradients track the fp32 CPU step, and training goes the same way") {
  if (!have_gpu()) return;
  check_against_cpu<CudaGpt, __nv_bfloat16>(gpt_shape(), 12, 20, {1e-2, 5e-2, 2e-2, 1e-1});
}

TEST_CASE("fp16 mixed precision (loss scale 1): the loss and gradients track the fp32 CPU step") {
  if (!have_gpu()) return;
  // fp16 has 3 more mantissa bits than bf16 and a narrower range; at this size nothing overflows
  // or underflows unscaled, so bf16's bounds hold with room (the loss scaling itself is
  // exercised through the trainer: test_cuda_trainer).
  check_against_cpu<CudaGpt, __half>(gpt_shape(), 13, 20, {1e-2, 5e-2, 2e-2, 1e-1});
}

TEST_CASE("Llama, fp32: one step's loss and gradients match the CPU, and so do the losses of the next steps") {
  if (!have_gpu()) return;
  check_against_cpu<CudaLlama, float>(llama_shape(false, false), 21, 5, {1e-5, 1e-4, 1e-4, 1e-3, 1e-3});
  check_against_cpu<CudaLlama, float>(llama_shape(true, true), 22, 5, {1e-5, 1e-4, 1e-4, 1e-3, 1e-3});
  auto multi_head = llama_shape(false, false);
  multi_head.n_kv_head = multi_head.n_head;
  check_against_cpu<CudaLlama, float>(multi_head, 25, 5, {1e-5, 1e-4, 1e-4, 1e-3, 1e-3});
}

TEST_CASE("Llama, bf16 and fp16 mixed precision: the loss and gradients track the fp32 CPU step") {
  if (!have_gpu()) return;
  check_against_cpu<CudaLlama, __nv_bfloat16>(llama_shape(false, false), 23, 20, {1e-2, 5e-2, 2e-2, 1e-1});
  check_against_cpu<CudaLlama, __half>(llama_shape(true, true), 24, 20, {1e-2, 5e-2, 2e-2, 1e-1});
}

TEST_CASE("cuDNN's flash attention in the whole step, bf16 and fp16: GPT-2 and grouped-query Llama track the CPU") {
  if (!have_gpu()) return;
  // The bounds of the materialising kernel's bf16 cases: the attention's own error (its kernel
  // parity case) is of the same order as the other bf16 roundings of a step.
  check_against_cpu<CudaGpt, __nv_bfloat16>(gpt_shape(), 31, 20, {1e-2, 5e-2, 2e-2, 1e-1}, CudaAttention::Cudnn);
  check_against_cpu<CudaGpt, __half>(gpt_shape(), 32, 20, {1e-2, 5e-2, 2e-2, 1e-1}, CudaAttention::Cudnn);
  check_against_cpu<CudaLlama, __nv_bfloat16>(llama_shape(false, false), 33, 20, {1e-2, 5e-2, 2e-2, 1e-1},
                                              CudaAttention::Cudnn);
}

TEST_CASE(
    "cuDNN's attention at a batch size after the first: its graphs are built then, and the loss is a fresh model's") {
  if (!have_gpu()) return;
  const ModelConfig shape = gpt_shape();
  const auto cpu_model = make_model<float>(shape);
  cpu_model->init_weights(51);
  const auto b = batch(shape, 51);
  CudaGpt<__nv_bfloat16> fresh(shape, nullptr, CudaAttention::Cudnn), grown(shape, nullptr, CudaAttention::Cudnn);
  if (fresh.attention().rfind("cuDNN", 0) != 0) {
    MESSAGE("skipped: cuDNN's attention does not run here: " << fresh.attention());
    return;
  }
  fresh.upload_params(cpu_model->params());
  grown.upload_params(cpu_model->params());
  grown.reserve(1);
  const float small = grown.forward(b.inputs.data(), b.targets.data(), 1);
  const float at_batch = grown.forward(b.inputs.data(), b.targets.data(), kBatch);
  CHECK(grown.attention() == fresh.attention());  // still cuDNN's, at both sizes
  CHECK(at_batch == fresh.forward(b.inputs.data(), b.targets.data(), kBatch));
  CHECK(grown.forward(b.inputs.data(), b.targets.data(), 1) == small);
}

namespace {

// The training forward (the logits' gradient written in the loss's pass) against forward then
// backward: the same kernel either way, so the same bits.
template <template <class> class GpuModel, class T>
void fused_loss_gradient_is_the_backward_s(const ModelConfig& shape, std::uint64_t seed) {
  const auto cpu_model = make_model<float>(shape);
  cpu_model->init_weights(seed);
  const auto b = batch(shape, seed);
  std::vector<float> grads[2];
  float losses[2] = {0, 0};
  for (const bool fused : {false, true}) {
    GpuModel<T> gpu(shape);
    gpu.upload_params(cpu_model->params());
    gpu.zero_grads();
    losses[fused] = fused ? gpu.forward(b.inputs.data(), b.targets.data(), kBatch, 0.5f)
                          : gpu.forward(b.inputs.data(), b.targets.data(), kBatch);
    gpu.backward(0.5f);
    grads[fused] = gpu.download_grads();
  }
  CHECK(losses[1] == losses[0]);
  CHECK(grads[1] == grads[0]);
}

}  // namespace

TEST_CASE("the training forward writes the logits' gradient in the loss's pass: the same loss and gradients") {
  if (!have_gpu()) return;
  fused_loss_gradient_is_the_backward_s<CudaGpt, __nv_bfloat16>(gpt_shape(), 41);
  fused_loss_gradient_is_the_backward_s<CudaLlama, float>(llama_shape(true, true), 42);
}
