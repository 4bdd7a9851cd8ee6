#include <cmath>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/device_math.cuh"

namespace meridian::kernels::cuda {
namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kWarpsPerBlock = 8;

// The head layout of one (B,T,W) row buffer: `parts` consecutive groups of heads (q | k | v: NH,
// KV, KV heads; or one group of NH), each gathered into a (B*heads, T, hs) block, the blocks one
// after the other.
struct Parts {
  int heads[3];
  int count;
  int hs;
  __host__ __device__ int width() const {
    int w = 0;
    for (int p = 0; p < count; ++p) w += heads[p] * hs;
    return w;
  }
};

// Moves heads between the (B,T,W) layout and the blocks; kSplit gathers, !kSplit scatters back.
template <class T, bool kSplit>
__global__ void permute_heads(T* blocks, T* x, int B, int Tn, Parts parts) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const int W = parts.width(), hs = parts.hs;
  if (i >= static_cast<std::size_t>(B) * Tn * W) return;
  const int col = static_cast<int>(i % W);
  const std::size_t bt = i / W;
  const int b = static_cast<int>(bt / Tn), t = static_cast<int>(bt % Tn);
  int part = 0, first = 0;
  std::size_t block = 0;
  while (col >= first + parts.heads[part] * hs) {
    first += parts.heads[part] * hs;
    block += static_cast<std::size_t>(B) * parts.heads[part] * Tn * hs;
    ++part;
  }
  const int h = (col - first) / hs, d = (col - first) % hs;
  const std::size_t j = block + ((static_cast<std::size_t>(b) * parts.heads[part] + h) * Tn + t) * hs + d;
  if constexpr (kSplit) blocks[j] = x[i];
  else x[i] = blocks[j];
}

// (B*KV, T, hs) -> (B*NH, T, hs): each group's head repeated for its rep = NH/KV query heads.
template <class T>
__global__ void repeat_heads(T* out, const T* in, int B, int NH, int KV, int head) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<std::size_t>(B) * NH * head) return;
  const std::size_t bh = i / head;
  const int b = static_cast<int>(bh / NH), h = static_cast<int>(bh % NH);
  out[i] = in[(static_cast<std::size_t>(b) * KV + h / (NH / KV)) * head + i % head];
}

// The reverse: each group's head gets the sum of its query heads' gradients, in head order.
template <class T>
__global__ void sum_repeated_heads(T* out, const T* in, int B, int NH, int KV, int head) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<std::size_t>(B) * KV * head) return;
  const std::size_t bj = i / head;
  const int b = static_cast<int>(bj / KV), j = static_cast<int>(bj % KV), rep = NH / KV;
  float acc = 0.0f;
  for (int r = 0; r < rep; ++r) acc += to_f32(in[(static_cast<std::size_t>(b) * NH + j * rep + r) * head + i % head]);
  out[i] = from_f32<T>(acc);
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
void permute(cudaStream_t stream, bool split, T* blocks, const T* x, int B, int Tn, Parts parts) {
  const std::size_t n = static_cast<std::size_t>(B) * Tn * parts.width();
  if (split)
    permute_heads<T, true><<<grid_for(n, kThreads), kThreads, 0, stream>>>(blocks, const_cast<T*>(x), B, Tn, parts);
  else
    permute_heads<T, false><<<grid_for(n, kThreads), kThreads, 0, stream>>>(blocks, const_cast<T*>(x), B, Tn, parts);
  MERIDIAN_CUDA_LAUNCHED();
}

// The key/value blocks as the query heads read them: `gathered` itself when every head has its
// own, else `repeated` filled.
template <class T>
const T* per_query_head(cudaStream_t stream, const T* gathered, T* repeated, int B, int NH, int KV, int head) {
  if (NH == KV) return gathered;
  const std::size_t n = static_cast<std::size_t>(B) * NH * head;
  repeat_heads<<<grid_for(n, kThreads), kThreads, 0, stream>>>(repeated, gathered, B, NH, KV, head);
  MERIDIAN_CUDA_LAUNCHED();
  return repeated;
}

}  // namespace

template <class T>
void attention_forward(Blas& blas, T* out, T* att, const T* qkv, int B, int Tn, int NH, int KV, int hs) {
  const int BH = B * NH;
  const long long head = static_cast<long long>(Tn) * hs, square = static_cast<long long>(Tn) * Tn;
  const std::size_t q_size = static_cast<std::size_t>(BH) * head, kv_size = static_cast<std::size_t>(B) * KV * head;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  StreamScratch<T> scratch(2 * q_size + 2 * kv_size + (NH == KV ? 0 : 2 * q_size), blas.stream());
  T *q = scratch.data(), *k = q + q_size, *v = k + kv_size, *y = v + kv_size, *k_rep = y + q_size, *v_rep = k_rep + q_size;
  permute(blas.stream(), true, q, qkv, B, Tn, Parts{{NH, KV, KV}, 3, hs});
  const T* kq = per_query_head<T>(blas.stream(), k, k_rep, B, NH, KV, static_cast<int>(head));
  const T* vq = per_query_head<T>(blas.stream(), v, v_rep, B, NH, KV, static_cast<int>(head));
  gemm_batched<T, T>(blas, false, true, Tn, Tn, hs, scale, q, hs, head, kq, hs, head, 0.0f, att, Tn, square, BH);
  causal_softmax<<<grid_for(static_cast<std::size_t>(BH) * Tn, kWarpsPerBlock), kWarpsPerBlock * 32, 0,
                   blas.stream()>>>(att, BH * Tn, Tn);
  MERIDIAN_CUDA_LAUNCHED();
  gemm_batched<T, T>(blas, false, false, Tn, hs, Tn, 1.0f, att, Tn, square, vq, hs, head, 0.0f, y, hs, head, BH);
  permute(blas.stream(), false, y, out, B, Tn, Parts{{NH, 0, 0}, 1, hs});
}

template <class T>
void attention_backward(Blas& blas, T* dqkv, const T* dout, const T* qkv, const T* att, int B, int Tn, int NH, int KV,
                        int hs) {
  const int BH = B * NH;
  const long long head = static_cast<long long>(Tn) * hs, square = static_cast<long long>(Tn) * Tn;
  const std::size_t q_size = static_cast<std::size_t>(BH) * head, kv_size = static_cast<std::size_t>(B) * KV * head;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const bool grouped = NH != KV;
  // q | k | v gathered, dy, dq | dk | dv in the same layout, and with groups the per-query-head
  // k, v (repeated) and dk, dv (to be summed back), then dS.
  StreamScratch<T> scratch(3 * q_size + 4 * kv_size + (grouped ? 4 * q_size : 0) + static_cast<std::size_t>(BH) * square,
                           blas.stream());
  T *q = scratch.data(), *k = q + q_size, *v = k + kv_size, *dy = v + kv_size;
  T *dq = dy + q_size, *dk = dq + q_size, *dv = dk + kv_size, *rest = dv + kv_size;
  T *k_rep = rest, *v_rep = k_rep + (grouped ? q_size : 0), *dk_rep = v_rep + (grouped ? q_size : 0);
  T *dv_rep = dk_rep + (grouped ? q_size : 0), *ds = dv_rep + (grouped ? q_size : 0);
  permute(blas.stream(), true, q, qkv, B, Tn, Parts{{NH, KV, KV}, 3, hs});
  permute(blas.stream(), true, dy, dout, B, Tn, Parts{{NH, 0, 0}, 1, hs});
  const T* kq = per_query_head<T>(blas.stream(), k, k_rep, B, NH, KV, static_cast<int>(head));
  const T* vq = per_query_head<T>(blas.stream(), v, v_rep, B, NH, KV, static_cast<int>(head));
  T* dkq = grouped ? dk_rep : dk;
  T* dvq = grouped ? dv_rep : dv;
  gemm_batched<T, T>(blas, true, false, Tn, hs, Tn, 1.0f, att, Tn, square, dy, hs, head, 0.0f, dvq, hs, head, BH);
  gemm_batched<T, T>(blas, false, true, Tn, Tn, hs, 1.0f, dy, hs, head, vq, hs, head, 0.0f, ds, Tn, square, BH);
  causal_softmax_backward<<<grid_for(static_cast<std::size_t>(BH) * Tn, kWarpsPerBlock), kWarpsPerBlock * 32, 0,
                            blas.stream()>>>(ds, att, BH * Tn, Tn, scale);
  MERIDIAN_CUDA_LAUNCHED();
  gemm_batched<T, T>(blas, false, false, Tn, hs, Tn, 1.0f, ds, Tn, square, kq, hs, head, 0.0f, dq, hs, head, BH);
  gemm_batched<T, T>(blas, true, false, Tn, hs, Tn, 1.0f, ds, Tn, square, q, hs, head, 0.0f, dkq, hs, head, BH);
  if (grouped) {
    const std::size_t n = static_cast<std::size_t>(B) * KV * head;
    sum_repeated_heads<<<grid_for(n, kThreads), kThreads, 0, blas.stream()>>>(dk, dk_rep, B, NH, KV, static_cast<int>(head));
    MERIDIAN_CUDA_LAUNCHED();
    sum_repeated_heads<<<grid_for(n, kThreads), kThreads, 0, blas.stream()>>>(dv, dv_rep, B, NH, KV, static_cast<int>(head));
    MERIDIAN_CUDA_LAUNCHED();
  }
  permute(blas.stream(), false, dq, dqkv, B, Tn, Parts{{NH, KV, KV}, 3, hs});  // dq | dk | dv, as q | k | v were gathered
}

#define MERIDIAN_ATTENTION(T)                                                                                   \
  template void attention_forward<T>(Blas&, T*, T*, const T*, int, int, int, int, int);                          \
  template void attention_backward<T>(Blas&, T*, const T*, const T*, const T*, int, int, int, int, int);
MERIDIAN_ATTENTION(float)
MERIDIAN_ATTENTION(__nv_bfloat16)
MERIDIAN_ATTENTION(__half)
#undef MERIDIAN_ATTENTION

}  // namespace meridian::kernels::cuda
