// make_cuda_step in a meridian built without the CUDA backend (no nvcc at configure time): the
// same typed answer as the start-up probe, so a GPU job fails at start-up, in words.
#include "core/device/cuda_probe.hpp"
#include "core/train/device_step.hpp"
#include "core/util/error.hpp"

namespace meridian {

std::unique_ptr<DeviceStep> make_cuda_step(const ModelConfig&, const AdamWOptions&, const ComputeDevice& device) {
  require_cuda_device(device.index);  // in this build: DeviceError(NotBuilt), in the probe's words
  MERIDIAN_CHECK(false, "require_cuda_device(", device.index, ") returned in a build without the CUDA backend");
  return nullptr;
}

}  // namespace meridian
