#pragma once
// Token + position embedding on the device, the contract of kernels/cpu/encoder.hpp.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace meridian::kernels::cuda {

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]       out: (B,T,C), wte: (V,C), wpe: (maxT,C); tokens on the device
// wpe null: no learned positions (Llama).
template <class T>
void encoder_forward(T* out, const std::int32_t* tokens, const T* wte, const T* wpe, int B, int Tn, int C,
                     cudaStream_t stream);

// dwte[tokens[b,t],:] += dout[b,t,:];  dwpe[t,:] += dout[b,t,:] unless dwpe is null   (accumulates, fp32 gradients)
// Deterministic without atomics: positions are sorted by token (a stable radix sort), and each
// distinct token's rows are added in position order, as the CPU twin adds them; for T = float the
// result is bit-identical to the CPU's.
template <class T>
void encoder_backward(float* dwte, float* dwpe, const T* dout, const std::int32_t* tokens, int B, int Tn, int C,
                      cudaStream_t stream);

}  // namespace meridian::kernels::cuda
