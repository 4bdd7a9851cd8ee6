#pragma once
// Causal multi-head self-attention without the (T, T) probabilities: the memory-efficient form of
// attention.hpp (same qkv/out layouts, same 1/sqrt(hs) scale, same results up to rounding).
// Forward walks the keys in tiles staged in shared memory and keeps an online softmax per query
// row (running max, running sum, rescaled accumulator), saving only each row's log-sum-exp for
// backward, which recomputes the probabilities from it: O(T) memory per head instead of O(T^2).
// Scores, probabilities and accumulators are fp32 whatever T stores. No atomics: dq is summed per
// query row, dk and dv per key row, each in a fixed order, so results are deterministic.
// Heads of up to 128 channels (hs <= kTiledMaxHeadSize).
#include <cuda_runtime_api.h>

namespace meridian::kernels::cuda {

inline constexpr int kTiledMaxHeadSize = 128;

// lse: (B, NH, T) fp32, written for backward.
template <class T>
void attention_tiled_forward(T* out, float* lse, const T* qkv, int B, int Tn, int C, int NH, cudaStream_t stream);

// dqkv is overwritten; out and lse are forward's.
template <class T>
void attention_tiled_backward(T* dqkv, const T* dout, const T* out, const T* qkv, const float* lse, int B, int Tn,
                              int C, int NH, cudaStream_t stream);

}  // namespace meridian::kernels::cuda
