// AdamW over device buffers against the CPU AdamW: same decay ranges, same moments, same weights,
// and the bf16 weight copy written in the same pass. Skipped, with a message, without a device.
#include <cuda_bf16.h>
#include <doctest/doctest.h>

#include <vector>

#include "core/model/param_layout.hpp"
#include "core/optim/adamw.hpp"
#include "core/optim/cuda_adamw.hpp"
#include "kernels/cuda/elementwise.hpp"
#include "tests/support/cuda_parity.hpp"

using namespace meridian;
using kernels::cuda::DeviceBuffer;
using meridian::testing::have_gpu;
using meridian::testing::normal_floats;

TEST_CASE("three CudaAdamW steps match AdamW: weights, moments, and the bf16 copy") {
  if (!have_gpu()) return;
  const ParamLayout layout = ParamLayout::of(ModelConfig{2, 2, 32, 16, 64});
  const std::size_t n = layout.total();
  auto params = normal_floats(n, 1, 0.1f);
  DeviceBuffer<float> d_params(params), d_grads(n);
  DeviceBuffer<__nv_bfloat16> d_copy(n);
  AdamW cpu(layout, AdamWOptions{});
  CudaAdamW gpu(layout, AdamWOptions{});
  for (int step = 0; step < 3; ++step) {
    const auto grads = normal_floats(n, 10 + step, 0.01f);
    d_grads.upload(grads);
    cpu.step(params, grads, 1e-2f);
    gpu.step(d_params.data(), d_grads.data(), 1e-2f, d_copy.data());
  }
  CHECK(gpu.steps_taken() == 3);
  CHECK_CLOSE(d_params.download(), params, 1e-6);
  CHECK_CLOSE(gpu.download_m(), cpu.m(), 1e-6);
  CHECK_CLOSE(gpu.download_v(), cpu.v(), 1e-6);
  DeviceBuffer<float> widened(n);
  kernels::cuda::widen_to_f32(widened.data(), d_copy.data(), n, nullptr);
  CHECK_CLOSE(widened.download(), params, 1e-2);  // bf16: 8 bits of mantissa
}
