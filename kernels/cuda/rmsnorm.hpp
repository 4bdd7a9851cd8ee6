#pragma once
// RMSNorm on the device, the contract of kernels/cpu/rmsnorm.hpp. The statistic is computed in
// fp32 whatever T is; rstd and the gain's gradient are fp32.
#include <cuda_runtime_api.h>

namespace meridian::kernels::cuda {

// out = w * x / sqrt(mean(x^2) + eps), row by row.   inp/out: (N,C); rstd: (N)
template <class T>
void rmsnorm_forward(T* out, float* rstd, const T* inp, const T* w, int N, int C, float eps, cudaStream_t stream);

// dinp += ..., dw += ... (both accumulate). dw is summed over rows in a fixed order (chunks of
// rows, then the chunks in order): deterministic, but not the CPU's order.
template <class T>
void rmsnorm_backward(T* dinp, float* dw, const T* dout, const T* inp, const T* w, const float* rstd, int N, int C,
                      cudaStream_t stream);

}  // namespace meridian::kernels::cuda
