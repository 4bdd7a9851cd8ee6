#pragma once

namespace meridian::kernels {

// Fused causal self-attention with NH query heads sharing KV key/value heads (grouped-query
// attention: query head h reads key/value head h / (NH / KV); KV = NH is multi-head attention):
// scores, causal mask, softmax and the weighted sum of values in one pass per (batch, head), so
// the (T,T) pre-softmax scores never reach memory.
//   qkv: (B,T,(NH+2KV)*hs) with q | k | v along the last dim, q head h at [h*hs, (h+1)*hs), key
//        head j at NH*hs + j*hs, value head j at (NH+KV)*hs + j*hs
//   out: (B,T,NH*hs); att: (B,NH,T,T) softmax probabilities (kept for backward; zero above the diagonal)
template <class T>
void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int NH, int KV, int hs);

// dqkv is overwritten. Parallel over (batch, key/value head): the query heads of a group add
// their key and value gradients in a fixed order, so the result does not depend on threads.
template <class T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* att, int B, int Tn, int NH, int KV, int hs);

}  // namespace meridian::kernels
