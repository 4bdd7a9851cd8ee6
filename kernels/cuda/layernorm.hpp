#pragma once
// LayerNorm on the device, the contract of kernels/cpu/layernorm.hpp (eps = kLayerNormEps).
// Statistics are computed in fp32 whatever T is; mean/rstd and the weight gradients are fp32.
#include <cuda_runtime_api.h>

namespace meridian::kernels::cuda {

template <class T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* w, const T* b, int N, int C,
                       cudaStream_t stream);

// dinp += ..., dw += ..., db += ... (all accumulate). dw and db are summed over rows in a fixed
// order (chunks of rows, then the chunks in order): deterministic, but not the CPU's order.
template <class T>
void layernorm_backward(T* dinp, float* dw, float* db, const T* dout, const T* inp, const T* w, const float* mean,
                        const float* rstd, int N, int C, cudaStream_t stream);

}  // namespace meridian::kernels::cuda
