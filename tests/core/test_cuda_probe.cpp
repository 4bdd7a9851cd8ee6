// The start-up device probe: what CUDA's error codes mean, and the error a machine without a
// usable GPU gives (this runs everywhere; on a GPU machine the found device is checked instead).
#include <doctest/doctest.h>

#include <string>

#include "core/device/cuda_probe.hpp"

using namespace meridian;

namespace {
bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("CUDA start-up error codes map to the problem a user can fix") {
  CHECK(classify_cuda_error(35) == DeviceProblem::DriverMissing);  // cudaErrorInsufficientDriver (what CI sees)
  CHECK(classify_cuda_error(34) == DeviceProblem::DriverMissing);  // stub libcuda
  CHECK(classify_cuda_error(803) == DeviceProblem::DriverMissing);
  CHECK(classify_cuda_error(100) == DeviceProblem::NoDevice);
  CHECK(classify_cuda_error(101) == DeviceProblem::NoDevice);
  CHECK(classify_cuda_error(2) == DeviceProblem::OutOfMemory);
  CHECK(classify_cuda_error(46) == DeviceProblem::Unusable);
  CHECK(to_string(DeviceProblem::DriverMissing) == "driver missing");
}

TEST_CASE("without a usable GPU, require_cuda_device throws a DeviceError that says why in words") {
  if (cuda_device_count() > 0) {
    MESSAGE("skipped: this machine has a CUDA device (the next case covers it)");
    return;
  }
  try {
    require_cuda_device(0);
    FAIL("require_cuda_device succeeded without a device");
  } catch (const DeviceError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(e.kind() == ErrorKind::Config);
    CHECK((e.problem() == DeviceProblem::NotBuilt || e.problem() == DeviceProblem::DriverMissing ||
           e.problem() == DeviceProblem::NoDevice));
    CHECK(contains(what, "device = \"cuda\""));
    CHECK(contains(what, "device = \"cpu\""));  // the way out
  }
}

TEST_CASE("with a GPU: the device is described, a missing index and an impossible allocation are refused") {
  if (cuda_device_count() == 0) {
    MESSAGE("skipped: no CUDA device");
    return;
  }
  const CudaDevice gpu = require_cuda_device(0, 1 << 20);
  CHECK(!gpu.name.empty());
  CHECK(gpu.sm_count > 0);
  CHECK(gpu.free_bytes <= gpu.total_bytes);
  try {
    require_cuda_device(cuda_device_count());
    FAIL("a device index past the last was accepted");
  } catch (const DeviceError& e) {
    CHECK(e.problem() == DeviceProblem::NoDevice);
  }
  try {
    require_cuda_device(0, gpu.total_bytes * 4);
    FAIL("an allocation of 4x the device's memory was accepted");
  } catch (const DeviceError& e) {
    INFO(e.what());
    CHECK(e.problem() == DeviceProblem::OutOfMemory);
    CHECK(contains(e.what(), "MiB free"));
  }
  require_cuda_device(0, 1 << 20);  // the failed allocation left nothing behind that breaks the next one
}
