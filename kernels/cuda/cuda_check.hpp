#pragma once
// Failures of CUDA and cuBLAS calls inside the kernels. A missing driver, a missing GPU or too
// little memory is found at start-up by the device probe (core/device) and reported there in
// words; what reaches these checks afterwards is a bug or a device fault, reported with the call
// that failed and where it was made, never as a bare error code.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <stdexcept>

namespace meridian::kernels::cuda {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void cuda_failed(const char* call, const char* error_name, const char* error_text, const char* file,
                              int line);

}  // namespace meridian::kernels::cuda

// A failure it throws also clears the runtime's last error: the throw reports it, and a caller that
// recovers (the cuDNN attention falls back when its workspace does not fit) must not meet it again
// at its next launch check. Sticky errors (a faulted kernel) stay whatever is cleared.
#define MERIDIAN_CUDA(call)                                                                          \
  do {                                                                                               \
    const cudaError_t meridian_err_ = (call);                                                        \
    if (meridian_err_ != cudaSuccess) {                                                              \
      (void)cudaGetLastError();                                                                      \
      ::meridian::kernels::cuda::cuda_failed(#call, cudaGetErrorName(meridian_err_),                 \
                                             cudaGetErrorString(meridian_err_), __FILE__, __LINE__); \
    }                                                                                                \
  } while (0)

#define MERIDIAN_CUBLAS(call)                                                                              \
  do {                                                                                                     \
    const cublasStatus_t meridian_st_ = (call);                                                            \
    if (meridian_st_ != CUBLAS_STATUS_SUCCESS)                                                             \
      ::meridian::kernels::cuda::cuda_failed(#call, cublasGetStatusName(meridian_st_),                     \
                                             cublasGetStatusString(meridian_st_), __FILE__, __LINE__);     \
  } while (0)

// After a <<<...>>> launch: a bad configuration is reported here, not at the next unrelated call.
#define MERIDIAN_CUDA_LAUNCHED() MERIDIAN_CUDA(cudaGetLastError())
