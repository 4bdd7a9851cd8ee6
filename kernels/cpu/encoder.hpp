#pragma once
#include <cstdint>

namespace meridian::kernels {

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]          out: (B,T,C), wte: (V,C), wpe: (maxT,C)
template <class T>
void encoder_forward(T* out, const std::uint16_t* tokens, const T* wte, const T* wpe, int B, int Tn, int C);

// dwte[tokens[b,t],:] += dout[b,t,:];  dwpe[t,:] += dout[b,t,:]   (accumulates)
template <class T>
void encoder_backward(T* dwte, T* dwpe, const T* dout, const std::uint16_t* tokens, int B, int Tn, int C);

}  // namespace meridian::kernels
