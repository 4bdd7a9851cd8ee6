#pragma once
#include <cstddef>

namespace meridian::kernels {

// GELU, tanh approximation (GPT-2's "gelu_new"): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
template <class T>
void gelu_forward(T* out, const T* inp, std::size_t n);

// dinp = dout * gelu'(inp)   (overwritten)
template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, std::size_t n);

}  // namespace meridian::kernels
