#include "core/device/cuda_probe.hpp"

#if MERIDIAN_HAVE_CUDA_RUNTIME
#include <cuda_runtime_api.h>
#endif

namespace meridian {

std::string_view to_string(DeviceProblem problem) {
  switch (problem) {
    case DeviceProblem::NotBuilt: return "not built";
    case DeviceProblem::DriverMissing: return "driver missing";
    case DeviceProblem::NoDevice: return "no device";
    case DeviceProblem::OutOfMemory: return "out of memory";
    case DeviceProblem::Unusable: return "unusable";
  }
  return "unknown";
}

// The numbers are cudaError_t's, stable across CUDA releases; spelled out so that the mapping is
// compiled (and tested) in builds without the CUDA headers too.
DeviceProblem classify_cuda_error(int code) {
  switch (code) {
    case 2: return DeviceProblem::OutOfMemory;      // cudaErrorMemoryAllocation
    case 3:                                         // cudaErrorInitializationError
    case 34:                                        // cudaErrorStubLibrary: libcuda is the toolkit's stub
    case 35:                                        // cudaErrorInsufficientDriver
    case 803:                                       // cudaErrorSystemDriverMismatch
    case 804: return DeviceProblem::DriverMissing;  // cudaErrorCompatNotSupportedOnDevice
    case 100:                                       // cudaErrorNoDevice
    case 101: return DeviceProblem::NoDevice;       // cudaErrorInvalidDevice
    default: return DeviceProblem::Unusable;        // e.g. 46 cudaErrorDevicesUnavailable (exclusive mode)
  }
}

namespace {

std::string advice(DeviceProblem problem) {
  switch (problem) {
    case DeviceProblem::NotBuilt:
      return "this meridian was built without the CUDA backend (configure with -DMERIDIAN_CUDA=ON on a machine "
             "with the CUDA toolkit), or set device = \"cpu\"";
    case DeviceProblem::DriverMissing:
      return "the NVIDIA driver is missing or older than this CUDA runtime needs; install or update it, or set "
             "device = \"cpu\"";
    case DeviceProblem::NoDevice:
      return "no CUDA GPU is visible to this process (check nvidia-smi and CUDA_VISIBLE_DEVICES), or set "
             "device = \"cpu\"";
    case DeviceProblem::OutOfMemory:
      return "the GPU has too little free memory (other processes on it? a smaller model or batch?)";
    case DeviceProblem::Unusable:
      return "the GPU cannot be used (busy in exclusive mode, or faulty; see nvidia-smi)";
  }
  return "";
}

[[noreturn]] void fail(DeviceProblem problem, const std::string& detail) {
  throw DeviceError(problem, "device = \"cuda\": " + advice(problem) + " (" + detail + ")");
}

}  // namespace

#if MERIDIAN_HAVE_CUDA_RUNTIME

namespace {

[[noreturn]] void fail_cuda(const char* call, cudaError_t err) {
  fail(classify_cuda_error(static_cast<int>(err)), std::string(call) + ": " + cudaGetErrorString(err));
}

}  // namespace

int cuda_device_count() {
  int count = 0;  // left unset when there is no driver
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

CudaDevice require_cuda_device(int index, std::size_t bytes_needed) {
  int count = 0;
  if (const cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess) fail_cuda("cudaGetDeviceCount", err);
  if (count == 0) fail(DeviceProblem::NoDevice, "the driver reports no device");
  if (index < 0 || index >= count)
    fail(DeviceProblem::NoDevice, "device " + std::to_string(index) + " asked for, " + std::to_string(count) +
                                      " present");
  cudaDeviceProp prop{};
  if (const cudaError_t err = cudaGetDeviceProperties(&prop, index); err != cudaSuccess)
    fail_cuda("cudaGetDeviceProperties", err);
  if (const cudaError_t err = cudaSetDevice(index); err != cudaSuccess) fail_cuda("cudaSetDevice", err);
  CudaDevice device;
  device.index = index;
  device.name = prop.name;
  device.cc_major = prop.major;
  device.cc_minor = prop.minor;
  device.sm_count = prop.multiProcessorCount;
  // The first call that needs a context creates it; a device too full for even that fails here.
  if (const cudaError_t err = cudaMemGetInfo(&device.free_bytes, &device.total_bytes); err != cudaSuccess)
    fail_cuda("cudaMemGetInfo", err);
  if (bytes_needed > 0) {
    void* probe = nullptr;
    const cudaError_t err = cudaMalloc(&probe, bytes_needed);
    if (err != cudaSuccess) {
      cudaGetLastError();  // reset the runtime's last error so that a later, unrelated check does not report it
      fail(classify_cuda_error(static_cast<int>(err)),
           device.name + " has " + std::to_string(device.free_bytes >> 20) + " MiB free of " +
               std::to_string(device.total_bytes >> 20) + " MiB; the job needs " + std::to_string(bytes_needed >> 20) +
               " MiB");
    }
    cudaFree(probe);
  }
  return device;
}

#else

int cuda_device_count() { return 0; }

CudaDevice require_cuda_device(int, std::size_t) { fail(DeviceProblem::NotBuilt, "MERIDIAN_CUDA was OFF or nvcc was not found"); }

#endif

}  // namespace meridian
