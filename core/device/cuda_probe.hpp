#pragma once
// Start-up check for a job that asks for GPUs (`device = "cuda"`): is this program built with the
// CUDA backend, is there a driver, a device, enough free memory? Each answer that is no becomes a
// DeviceError saying which, in words, before any training starts, never a raw CUDA error code
// later. Works in a build without CUDA too, where it says so.
#include <cstddef>
#include <string>

#include "core/util/error.hpp"

namespace meridian {

enum class DeviceProblem {
  NotBuilt,       // this meridian was built without the CUDA backend
  DriverMissing,  // no NVIDIA driver, or one older than the CUDA runtime needs
  NoDevice,       // a driver but no (such) GPU, or none visible (CUDA_VISIBLE_DEVICES)
  OutOfMemory,    // the GPU has less free memory than the job needs
  Unusable,       // busy (exclusive mode), or another failure of the runtime
};

std::string_view to_string(DeviceProblem problem);

// Error(Config): the machine does not match the job file, which is where it must be fixed.
class DeviceError : public Error {
 public:
  DeviceError(DeviceProblem problem, const std::string& what) : Error(ErrorKind::Config, what), problem_(problem) {}
  DeviceProblem problem() const { return problem_; }

 private:
  DeviceProblem problem_;
};

// What a CUDA runtime error code met at start-up means (cudaError_t values; pure, so it is
// tested on machines without a GPU).
DeviceProblem classify_cuda_error(int code);

struct CudaDevice {
  int index = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  std::size_t total_bytes = 0, free_bytes = 0;
};

// Number of usable CUDA devices; 0 when there is no backend, no driver or no device.
int cuda_device_count();

// Device `index`, with at least `bytes_needed` bytes allocatable on it; DeviceError otherwise.
CudaDevice require_cuda_device(int index = 0, std::size_t bytes_needed = 0);

}  // namespace meridian
