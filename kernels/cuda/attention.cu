#include <cmath>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/device_math.cuh"

namespace meridian::kernels::cuda {
namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kWarpsPerBlock = 8;

// Moves heads between the (B,T,parts*C) layout (`parts` slices of C: q | k | v, or one) and
// `parts` tensors (B*NH, T, hs) laid one after the other; kSplit gathers, !kSplit scatters back.
template <class T, bool kSplit>
__global__ void permute_heads(T* heads, T* x, int B, int Tn, int C, int NH, int parts) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t per_part = static_cast<std::size_t>(B) * Tn * C;
  if (i >= per_part * parts) return;
  const int hs = C / NH, ld = parts * C;
  const int col = static_cast<int>(i % ld);
  const std::size_t bt = i / ld;
  const int b = static_cast<int>(bt / Tn), t = static_cast<int>(bt % Tn);
  const int part = col / C, h = (col % C) / hs, d = col % hs;
  const std::size_t j = part * per_part + ((static_cast<std::size_t>(b) * NH + h) * Tn + t) * hs + d;
  if constexpr (kSplit) heads[j] = x[i];
  else x[i] = heads[j];
}

// One warp per score row t: softmax over keys 0..t, zeros above the diagonal.
template <class T>
__global__ void causal_softmax(T* att, int rows, int Tn) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int t = row % Tn;
  T* a = att + static_cast<std::size_t>(row) * Tn;
  float maxv = MaxOp::identity;
  for (int j = lane; j <= t; j += 32) maxv = fmaxf(maxv, to_f32(a[j]));
  maxv = warp_reduce(maxv, MaxOp{});
  float sum = 0.0f;
  for (int j = lane; j <= t; j += 32) sum += expf(to_f32(a[j]) - maxv);
  const float inv = 1.0f / warp_reduce(sum, SumOp{});
  for (int j = lane; j < Tn; j += 32) a[j] = from_f32<T>(j <= t ? expf(to_f32(a[j]) - maxv) * inv : 0.0f);
}

// dS = P * (dP - <P, dP>) * scale, row by row; masked entries (P = 0) get 0.
template <class T>
__global__ void causal_softmax_backward(T* ds, const T* att, int rows, int Tn, float scale) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int t = row % Tn;
  const T* p = att + static_cast<std::size_t>(row) * Tn;
  T* d = ds + static_cast<std::size_t>(row) * Tn;
  float inner = 0.0f;
  for (int j = lane; j <= t; j += 32) inner += to_f32(p[j]) * to_f32(d[j]);
  inner = warp_reduce(inner, SumOp{});
  for (int j = lane; j < Tn; j += 32)
    d[j] = from_f32<T>(j <= t ? to_f32(p[j]) * (to_f32(d[j]) - inner) * scale : 0.0f);
}

template <class T>
void split(cudaStream_t stream, T* heads, const T* x, int B, int Tn, int C, int NH, int parts) {
  const std::size_t n = static_cast<std::size_t>(B) * Tn * C * parts;
  permute_heads<T, true><<<grid_for(n, kThreads), kThreads, 0, stream>>>(heads, const_cast<T*>(x), B, Tn, C, NH,
                                                                         parts);
  MERIDIAN_CUDA_LAUNCHED();
}

template <class T>
void merge(cudaStream_t stream, T* x, const T* heads, int B, int Tn, int C, int NH, int parts) {
  const std::size_t n = static_cast<std::size_t>(B) * Tn * C * parts;
  permute_heads<T, false><<<grid_for(n, kThreads), kThreads, 0, stream>>>(const_cast<T*>(heads), x, B, Tn, C, NH,
                                                                          parts);
  MERIDIAN_CUDA_LAUNCHED();
}

}  // namespace

template <class T>
void attention_forward(Blas& blas, T* out, T* att, const T* qkv, int B, int Tn, int C, int NH) {
  const int hs = C / NH, BH = B * NH;
  const std::size_t per = static_cast<std::size_t>(B) * Tn * C;
  const long long head = static_cast<long long>(Tn) * hs, square = static_cast<long long>(Tn) * Tn;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  StreamScratch<T> scratch(4 * per, blas.stream());
  T *q = scratch.data(), *k = q + per, *v = k + per, *y = v + per;
  split(blas.stream(), q, qkv, B, Tn, C, NH, 3);
  gemm_batched<T, T>(blas, false, true, Tn, Tn, hs, scale, q, hs, head, k, hs, head, 0.0f, att, Tn, square, BH);
  causal_softmax<<<grid_for(static_cast<std::size_t>(BH) * Tn, kWarpsPerBlock), kWarpsPerBlock * 32, 0,
                   blas.stream()>>>(att, BH * Tn, Tn);
  MERIDIAN_CUDA_LAUNCHED();
  gemm_batched<T, T>(blas, false, false, Tn, hs, Tn, 1.0f, att, Tn, square, v, hs, head, 0.0f, y, hs, head, BH);
  merge(blas.stream(), out, y, B, Tn, C, NH, 1);
}

template <class T>
void attention_backward(Blas& blas, T* dqkv, const T* dout, const T* qkv, const T* att, int B, int Tn, int C,
                        int NH) {
  const int hs = C / NH, BH = B * NH;
  const std::size_t per = static_cast<std::size_t>(B) * Tn * C;
  const long long head = static_cast<long long>(Tn) * hs, square = static_cast<long long>(Tn) * Tn;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  StreamScratch<T> scratch(7 * per + static_cast<std::size_t>(BH) * square, blas.stream());
  T *q = scratch.data(), *k = q + per, *v = k + per, *dy = v + per, *dq = dy + per, *dk = dq + per, *dv = dk + per;
  T* ds = dv + per;
  split(blas.stream(), q, qkv, B, Tn, C, NH, 3);
  split(blas.stream(), dy, dout, B, Tn, C, NH, 1);
  gemm_batched<T, T>(blas, true, false, Tn, hs, Tn, 1.0f, att, Tn, square, dy, hs, head, 0.0f, dv, hs, head, BH);
  gemm_batched<T, T>(blas, false, true, Tn, Tn, hs, 1.0f, dy, hs, head, v, hs, head, 0.0f, ds, Tn, square, BH);
  causal_softmax_backward<<<grid_for(static_cast<std::size_t>(BH) * Tn, kWarpsPerBlock), kWarpsPerBlock * 32, 0,
                            blas.stream()>>>(ds, att, BH * Tn, Tn, scale);
  MERIDIAN_CUDA_LAUNCHED();
  gemm_batched<T, T>(blas, false, false, Tn, hs, Tn, 1.0f, ds, Tn, square, k, hs, head, 0.0f, dq, hs, head, BH);
  gemm_batched<T, T>(blas, true, false, Tn, hs, Tn, 1.0f, ds, Tn, square, q, hs, head, 0.0f, dk, hs, head, BH);
  merge(blas.stream(), dqkv, dq, B, Tn, C, NH, 3);  // dq, dk, dv lie one after the other, as split wrote q, k, v
}

template void attention_forward<float>(Blas&, float*, float*, const float*, int, int, int, int);
template void attention_forward<__nv_bfloat16>(Blas&, __nv_bfloat16*, __nv_bfloat16*, const __nv_bfloat16*, int, int,
                                               int, int);
template void attention_backward<float>(Blas&, float*, const float*, const float*, const float*, int, int, int, int);
template void attention_backward<__nv_bfloat16>(Blas&, __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                                                const __nv_bfloat16*, int, int, int, int);
template void attention_forward<__half>(Blas&, __half*, __half*, const __half*, int, int, int, int);
template void attention_backward<__half>(Blas&, __half*, const __half*, const __half*, const __half*, int, int, int,
                                         int);

}  // namespace meridian::kernels::cuda
