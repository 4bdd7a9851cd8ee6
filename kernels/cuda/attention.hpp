#pragma once
// Causal self-attention on the device with NH query heads sharing KV key/value heads (grouped-query
// attention; KV = NH is multi-head), the contract of kernels/cpu/attention.hpp:
//   qkv: (B,T,(NH+2KV)*hs) q | k | v, query head h at [h*hs, (h+1)*hs), key head j at NH*hs + j*hs,
//        value head j at (NH+KV)*hs + j*hs; query head h reads key/value head h / (NH/KV);
//   out: (B,T,NH*hs); att: (B,NH,T,T) softmax probabilities, zero above the diagonal, kept for backward.
// Heads are gathered into (B*heads, T, hs) blocks (a group's key/value head repeated for each of
// its query heads) so that the score and value products are two strided-batched cuBLAS calls;
// between them one kernel applies the causal mask and the softmax in a single pass over each row
// (the 1/sqrt(hs) is folded into the score product, as on the CPU). Backward adds the repeated
// heads' key and value gradients back into their group's head in a fixed order. This is the
// materialising form (O(T^2) memory per head); attention_tiled.hpp is the memory-efficient one.
#include <cuda_runtime_api.h>

#include "kernels/cuda/gemm.hpp"

namespace meridian::kernels::cuda {

template <class T>
void attention_forward(Blas& blas, T* out, T* att, const T* qkv, int B, int Tn, int NH, int KV, int hs);

// dqkv is overwritten.
template <class T>
void attention_backward(Blas& blas, T* dqkv, const T* dout, const T* qkv, const T* att, int B, int Tn, int NH, int KV,
                        int hs);

}  // namespace meridian::kernels::cuda
