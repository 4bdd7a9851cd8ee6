#pragma once
// GELU (tanh approximation, GPT-2's "gelu_new") on the device, the contract of kernels/cpu/gelu.hpp.
#include <cuda_runtime_api.h>

#include <cstddef>

namespace meridian::kernels::cuda {

template <class T>
void gelu_forward(T* out, const T* inp, std::size_t n, cudaStream_t stream);

// dinp = dout * gelu'(inp)   (overwritten)
template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, std::size_t n, cudaStream_t stream);

}  // namespace meridian::kernels::cuda
