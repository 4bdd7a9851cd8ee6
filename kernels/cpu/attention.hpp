#pragma once

namespace meridian::kernels {

// Fused causal multi-head self-attention: scores, causal mask, softmax and the weighted sum of
// values in one pass per (batch, head), so the (T,T) pre-softmax scores never reach memory.
//   qkv: (B,T,3C) with q | k | v along the last dim, head h at [h*hs, (h+1)*hs), hs = C/NH
//   out: (B,T,C); att: (B,NH,T,T) softmax probabilities (kept for backward; zero above the diagonal)
template <class T>
void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int C, int NH);

// dqkv is overwritten. Parallel over (batch, head): every head's gradient is written by one thread.
template <class T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* att, int B, int Tn, int C, int NH);

}  // namespace meridian::kernels
