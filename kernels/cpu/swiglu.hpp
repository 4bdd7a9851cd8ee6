#pragma once
#include <cstddef>

namespace meridian::kernels {

// SwiGLU's gate: out[n,j] = silu(g[n,j]) * u[n,j], silu(g) = g / (1 + e^-g), where each row of
// gate_up holds g then u:   gate_up: (N, 2F) (the gate and up projections in one product), out: (N, F)
template <class T>
void swiglu_forward(T* out, const T* gate_up, int N, int F);

// dgate_up (N, 2F) = the gradients of g and u (overwritten)
template <class T>
void swiglu_backward(T* dgate_up, const T* gate_up, const T* dout, int N, int F);

}  // namespace meridian::kernels
