// The CUDA error checks (kernels/cuda/cuda_check.hpp): a failure is reported once, by its throw.
// Not run under compute-sanitizer (scripts/gpu-check.sh), which reports the refused allocation
// itself as an API error. Skipped, with a message, without a CUDA device.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/elementwise.hpp"
#include "tests/support/cuda_parity.hpp"

using namespace meridian::kernels::cuda;
using meridian::testing::have_gpu;

TEST_CASE("a refused allocation throws once: the next launch check does not meet it again") {
  if (!have_gpu()) return;
  // A pebibyte: more than any device holds, so cudaMalloc refuses it.
  CHECK_THROWS_AS(DeviceBuffer<std::uint8_t>(std::size_t{1} << 50), CudaError);
  DeviceBuffer<float> x(std::vector<float>{1.0f, 2.0f});
  CHECK_NOTHROW(scale(x.data(), x.size(), 2.0f, nullptr));  // its launch check reads the last error
  CHECK(x.download() == std::vector<float>{2.0f, 4.0f});
}
