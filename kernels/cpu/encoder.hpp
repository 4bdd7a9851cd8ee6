#pragma once
#include <cstdint>

namespace meridian::kernels {

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]          out: (B,T,C), wte: (V,C), wpe: (maxT,C)
// wpe null: a model without learned positions (Llama), out[b,t,:] = wte[tokens[b,t],:].
template <class T>
void encoder_forward(T* out, const std::int32_t* tokens, const T* wte, const T* wpe, int B, int Tn, int C);

// dwte[tokens[b,t],:] += dout[b,t,:];  dwpe[t,:] += dout[b,t,:] unless dwpe is null   (accumulates)
template <class T>
void encoder_backward(T* dwte, T* dwpe, const T* dout, const std::int32_t* tokens, int B, int Tn, int C);

}  // namespace meridian::kernels
