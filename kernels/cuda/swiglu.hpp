#pragma once
// SwiGLU's gate on the device, the contract of kernels/cpu/swiglu.hpp: out[n,j] = silu(g) * u with
// each row of gate_up (N, 2F) holding g then u; computed in fp32 whatever T is.
#include <cuda_runtime_api.h>

namespace meridian::kernels::cuda {

template <class T>
void swiglu_forward(T* out, const T* gate_up, int N, int F, cudaStream_t stream);

// dgate_up (N, 2F) overwritten with the gradients of g and u.
template <class T>
void swiglu_backward(T* dgate_up, const T* gate_up, const T* dout, int N, int F, cudaStream_t stream);

}  // namespace meridian::kernels::cuda
