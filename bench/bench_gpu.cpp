// GPU training throughput and MFU: the CUDA model (core/model/cuda_gpt.hpp, cuda_llama.hpp)
// training GPT-2 124M by default (the `gpt2` preset: 12 layers, 12 heads, 768 channels, context
// 1024, vocab 50257), or any preset of either family, with AdamW, bf16 mixed precision by default. One step = zero
// grads, forward, backward, gradient clipping to norm 1 (the norm comes back to the host, as the trainer needs it),
// AdamW writing the bf16 weight copy: the trainer's DeviceStep itself. Steps are timed on the host after warm-up, each
// ended by a device synchronisation; the median step gives tokens/s,
// and FLOPs per step (bench/flops.hpp, the same count as bench_trainer) over the device's peak
// dense bf16 rate give the MFU. After the timed steps, --phases N more steps are timed by CUDA
// events around each kernel group (DeviceStep::time_phases): the per-phase table of docs/gpu.md.
// The device memory in use after the timed steps (cudaMemGetInfo: the CUDA context included) is
// the step's footprint.
//
//   build/release/bench/bench_gpu [--batch 8] [--steps 20] [--warmup 3] [--precision bf16|fp16|fp32]
//                                 [--attention materialized|tiled|cudnn] [--phases 5] [--seq T]
//                                 [--logits-align 64] [--bias-epilogue 1] [--fused-loss 1]
//                                 [--preset gpt2] [--peak-tflops X]
//
// The last line of output is one JSON object of the figures, for scripts/gpu-bench.sh.
// Tokens are random (seeded): throughput does not depend on them. Exit 1 with the probe's
// message where there is no usable GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "bench/flops.hpp"
#include "bench/stats.hpp"
#include "core/device/cuda_probe.hpp"
#include "core/model/language_model.hpp"
#include "core/model/param_layout.hpp"
#include "core/train/device_step.hpp"
#include "core/util/rng.hpp"
#include "kernels/cuda/cuda_check.hpp"

using namespace meridian;

namespace {

struct Options {
  int batch = 8, steps = 20, warmup = 3, phases = 5, seq = 0;  // seq 0: the preset's window
  int logits_align = 64;  // ComputeDevice::logits_align: 1 measures the unaligned output layer
  int bias_epilogue = 1, fused_loss = 1;  // 0: without that fusion (ComputeDevice's), to measure it
  std::string precision = "bf16", preset = "gpt2", attention = "materialized";
  double peak_tflops = 0;  // 0: from the device
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--batch") o.batch = std::atoi(value.c_str());
    else if (key == "--steps") o.steps = std::atoi(value.c_str());
    else if (key == "--warmup") o.warmup = std::atoi(value.c_str());
    else if (key == "--phases") o.phases = std::atoi(value.c_str());
    else if (key == "--seq") o.seq = std::atoi(value.c_str());
    else if (key == "--logits-align") o.logits_align = std::atoi(value.c_str());
    else if (key == "--bias-epilogue")
      o.bias_epilogue = std::atoi(value.c_str());
    else if (key == "--fused-loss")
      o.fused_loss = std::atoi(value.c_str());
    else if (key == "--precision") o.precision = value;
    else if (key == "--attention") o.attention = value;
    else if (key == "--preset") o.preset = value;
    else if (key == "--peak-tflops") o.peak_tflops = std::atof(value.c_str());
    else {
      std::fprintf(stderr, "bench_gpu: unknown option %s\n", key.c_str());
      std::exit(2);
    }
  }
  if ((argc - 1) % 2 != 0 || o.batch < 1 || o.steps < 1 || o.warmup < 0 || o.phases < 0 || o.seq < 0 ||
      o.logits_align < 1 || (o.bias_epilogue != 0 && o.bias_epilogue != 1) ||
      (o.fused_loss != 0 && o.fused_loss != 1) ||
      (o.precision != "bf16" && o.precision != "fp16" && o.precision != "fp32") ||
      (o.attention != "materialized" && o.attention != "tiled" && o.attention != "cudnn")) {
    std::fprintf(stderr,
                 "usage: bench_gpu [--batch N] [--steps N] [--warmup N] [--precision bf16|fp16|fp32] "
                 "[--attention materialized|tiled|cudnn] [--phases N] [--seq T] [--logits-align N] "
                 "[--bias-epilogue 0|1] [--fused-loss 0|1] "
                 "[--preset NAME] [--peak-tflops X]\n");
    std::exit(2);
  }
  return o;
}

// Dense (no sparsity) bf16 tensor-core peaks from NVIDIA's data sheets, by compute capability and
// name; anything else needs --peak-tflops.
double peak_bf16_tflops(const CudaDevice& d) {
  const std::string name = d.name;
  if (d.cc_major == 9 && d.cc_minor == 0) return name.find("PCIe") != std::string::npos ? 756.0 : 989.4;  // H100/H200
  if (d.cc_major == 8 && d.cc_minor == 0) return 312.0;                                                     // A100
  return 0;
}

// A description for a JSON string: quotes and backslashes (a library's error) become apostrophes and slashes.
std::string json_safe(std::string text) {
  for (char& c : text) {
    if (c == '"') c = '\'';
    if (c == '\\') c = '/';
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return text;
}

// The per-phase table: milliseconds per step and share of the phases' sum, largest first.
void print_phases(const std::map<std::string, double>& phase_ms, double step_ms) {
  if (phase_ms.empty()) return;
  std::vector<std::pair<double, std::string>> rows;
  double total = 0;
  for (const auto& [phase, ms] : phase_ms) {
    rows.emplace_back(ms, phase);
    total += ms;
  }
  std::sort(rows.rbegin(), rows.rend());
  std::printf("device time by phase, per step (%.2f ms timed by events, the host's median step %.2f ms):\n", total,
              step_ms);
  for (const auto& [ms, phase] : rows)
    std::printf("  %-40s %8.3f ms %5.1f%%\n", phase.c_str(), ms, 100.0 * ms / total);
}

int run(const Options& o, const ModelConfig& shape, const CudaDevice& device, double peak) {
  const auto init = make_model<float>(shape);  // the trainer's initialisation, on the host
  init->init_weights(1337);
  // The trainer's own step on a GPU (core/train/device_step.hpp), as a site runs it.
  ComputeDevice gpu{JobConfig::Site::Device::Cuda, JobConfig::Site::Precision::Fp32,
                    o.attention == "tiled"   ? JobConfig::Site::Attention::Tiled
                    : o.attention == "cudnn" ? JobConfig::Site::Attention::Cudnn
                                             : JobConfig::Site::Attention::Materialized,
                    device.index};
  if (o.precision == "bf16") gpu.precision = JobConfig::Site::Precision::Bf16;
  if (o.precision == "fp16") gpu.precision = JobConfig::Site::Precision::Fp16;
  gpu.logits_align = o.logits_align;
  gpu.bias_epilogue = o.bias_epilogue == 1;
  gpu.loss_gradient_in_forward = o.fused_loss == 1;
  const auto step_on_gpu = make_cuda_step(shape, AdamWOptions{}, gpu);
  step_on_gpu->upload_params(init->params());
  const std::size_t BT = static_cast<std::size_t>(o.batch) * shape.seq_len;
  Rng rng(7);
  std::vector<std::int32_t> inputs(BT), targets(BT);
  // The loss and the gradient norm come back to the host every step (as in the trainer), so a
  // step's host time is its device time plus the launches it waited for.
  auto step = [&] {
    for (std::size_t i = 0; i < BT; ++i) {
      inputs[i] = static_cast<std::int32_t>(rng.next_u64() % shape.vocab);
      targets[i] = static_cast<std::int32_t>(rng.next_u64() % shape.vocab);
    }
    step_on_gpu->zero_grads();
    const float loss = step_on_gpu->forward_backward(inputs.data(), targets.data(), o.batch, 1.0f);
    if (step_on_gpu->clip(1.0)) step_on_gpu->adamw(3e-4f);  // fp16: an overflowed step is skipped
    return loss;
  };
  for (int i = 0; i < o.warmup; ++i) step();
  MERIDIAN_CUDA(cudaDeviceSynchronize());
  std::vector<double> seconds;
  float loss = 0;
  for (int i = 0; i < o.steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    loss = step();
    MERIDIAN_CUDA(cudaDeviceSynchronize());
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::size_t free_bytes = 0, total_bytes = 0;
  MERIDIAN_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  const double mem_gib = static_cast<double>(total_bytes - free_bytes) / (1u << 30);
  std::map<std::string, double> phase_ms;
  if (o.phases > 0) {
    step_on_gpu->time_phases(true);
    for (int i = 0; i < o.phases; ++i) step();
    phase_ms = step_on_gpu->take_phase_ms();
    step_on_gpu->time_phases(false);
    for (auto& [phase, ms] : phase_ms) ms /= o.phases;
  }
  const double median = bench::median(seconds);
  const double tokens_per_s = static_cast<double>(BT) / median;
  const double tflops = bench::train_flops_per_step(shape, o.batch) / median / 1e12;
  std::printf("device %s (sm_%d%d, %d SMs), %s, %s, %s attention, B=%d T=%d, %zu parameters\n",
              device.name.c_str(), device.cc_major, device.cc_minor, device.sm_count, o.preset.c_str(),
              o.precision.c_str(), o.attention.c_str(), o.batch,
              shape.seq_len, ParamLayout::of(shape).total());
  std::printf("attention: %s\n", step_on_gpu->attention().c_str());
  std::printf("step median %.2f ms (min %.2f, max %.2f over %d steps), %.0f tokens/s, %.1f TFLOP/s, last loss %.3f\n",
              median * 1e3, *std::min_element(seconds.begin(), seconds.end()) * 1e3,
              *std::max_element(seconds.begin(), seconds.end()) * 1e3, o.steps, tokens_per_s, tflops, loss);
  if (peak > 0)
    std::printf("MFU %.1f%% of %.1f TFLOP/s dense bf16 peak\n", 100.0 * tflops / peak, peak);
  else
    std::printf("MFU: unknown peak for this device; pass --peak-tflops\n");
  std::printf("device memory in use %.2f GiB of %.2f\n", mem_gib, static_cast<double>(total_bytes) / (1u << 30));
  print_phases(phase_ms, median * 1e3);
  std::string phases_json;
  for (const auto& [phase, ms] : phase_ms)
    phases_json += (phases_json.empty() ? "" : ", ") + ("\"" + phase + "\": " + std::to_string(ms));
  std::printf(
      "{\"preset\": \"%s\", \"precision\": \"%s\", \"attention\": \"%s\", \"attention_run\": \"%s\", "
      "\"B\": %d, \"T\": %d, \"logits_align\": %d, \"bias_epilogue\": %d, \"fused_loss\": %d, "
      "\"params\": %zu, \"tokens_per_s\": %.1f, "
      "\"tflops\": %.2f, \"mfu\": %.4f, \"step_ms\": %.3f, \"mem_gib\": %.3f, \"phases_ms\": {%s}}\n",
      o.preset.c_str(), o.precision.c_str(), o.attention.c_str(), json_safe(step_on_gpu->attention()).c_str(), o.batch,
      shape.seq_len, o.logits_align, o.bias_epilogue, o.fused_loss, ParamLayout::of(shape).total(), tokens_per_s,
      tflops, peak > 0 ? tflops / peak : 0.0, median * 1e3, mem_gib, phases_json.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  auto shape = find_model_preset(o.preset);
  if (!shape) {
    std::fprintf(stderr, "bench_gpu: no preset %s\n", o.preset.c_str());
    return 2;
  }
  if (o.seq > 0) {
    if (o.seq > shape->positions()) {
      std::fprintf(stderr, "bench_gpu: --seq %d is longer than %s's context of %d\n", o.seq, o.preset.c_str(),
                   shape->positions());
      return 2;
    }
    shape->seq_len = o.seq;
  }
  try {
    const CudaDevice device = require_cuda_device(0);
    const double peak = o.peak_tflops > 0 ? o.peak_tflops : peak_bf16_tflops(device);
    return run(o, *shape, device, peak);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu: %s\n", e.what());
    return 1;
  }
}
