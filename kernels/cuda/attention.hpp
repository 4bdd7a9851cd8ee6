#pragma once
// Causal multi-head self-attention on the device, the contract of kernels/cpu/attention.hpp:
//   qkv: (B,T,3C) q | k | v, head h at [h*hs, (h+1)*hs); out: (B,T,C);
//   att: (B,NH,T,T) softmax probabilities, zero above the diagonal, kept for backward.
// Heads are gathered into (B*NH, T, hs) blocks so that the score and value products are two
// strided-batched cuBLAS calls; between them one kernel applies the causal mask and the softmax
// in a single pass over each row (the 1/sqrt(hs) is folded into the score product, as on the CPU).
// This is the materialising form (O(T^2) memory per head); attention_tiled.hpp is the
// memory-efficient one.
#include <cuda_runtime_api.h>

#include "kernels/cuda/gemm.hpp"

namespace meridian::kernels::cuda {

template <class T>
void attention_forward(Blas& blas, T* out, T* att, const T* qkv, int B, int Tn, int C, int NH);

// dqkv is overwritten.
template <class T>
void attention_backward(Blas& blas, T* dqkv, const T* dout, const T* qkv, const T* att, int B, int Tn, int C, int NH);

}  // namespace meridian::kernels::cuda
