#pragma once
// Rotary position embeddings on the device, the contract of kernels/cpu/rope.hpp: in place on
// `heads` consecutive heads of hs channels at x[(b*T + t) * ld ...], channel i < hs/2 paired with
// i + hs/2 and turned by the angle whose cosine and sine are cos/sin[t * hs/2 + i] (fp32, the
// table kernels/cpu/rope.hpp's rope_table computes); backward turns the gradient back.
#include <cuda_runtime_api.h>

namespace meridian::kernels::cuda {

template <class T>
void rope_forward(T* x, const float* cos, const float* sin, int B, int Tn, int heads, int hs, int ld,
                  cudaStream_t stream);
template <class T>
void rope_backward(T* dx, const float* cos, const float* sin, int B, int Tn, int heads, int hs, int ld,
                   cudaStream_t stream);

}  // namespace meridian::kernels::cuda
