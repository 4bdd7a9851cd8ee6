#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <string>

#include "kernels/cuda/attention_tiled.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/device_math.cuh"

namespace meridian::kernels::cuda {
namespace {

// A block is kRows warps, one row each (query rows forward and for dq, key rows for dk/dv) of one
// (batch, head); the rows it pairs them with are staged kTile at a time in shared memory.
constexpr int kRows = 8;
constexpr int kTile = 32;
constexpr int kPerLane = kTiledMaxHeadSize / 32;  // channels a lane holds: d = lane + 32 i

// Where head h of position t starts in a (B, T, parts * C) tensor; part 0, 1, 2 = q, k, v.
struct Heads {
  int Tn, C, NH, hs;
  __device__ std::size_t at(int b, int t, int h, int part, int parts) const {
    return (static_cast<std::size_t>(b) * Tn + t) * parts * C + part * C + h * hs;
  }
};

template <class T>
__device__ void load_row(float (&x)[kPerLane], const T* row, int hs, int lane) {
  for (int i = 0; i < kPerLane; ++i) {
    const int d = lane + 32 * i;
    x[i] = d < hs ? to_f32(row[d]) : 0.0f;
  }
}

// Sum over the warp of x . y, the lane's channels of each; every lane gets it.
__device__ float dot(const float (&x)[kPerLane], const float* y, int hs, int lane) {
  float s = 0.0f;
  for (int i = 0; i < kPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < hs) s += x[i] * y[d];
  }
  return warp_reduce(s, SumOp{});
}

// Stages rows [first, first + kTile) of `part` (and of `part2` when >= 0) as fp32; rows past Tn are zeros.
template <class T>
__device__ void stage(float (*a)[kTiledMaxHeadSize], float (*b)[kTiledMaxHeadSize], const T* x, const T* y,
                      const Heads& H, int bi, int h, int first, int part_a, int parts_a, int part_b, int parts_b) {
  for (int e = threadIdx.x; e < kTile * H.hs; e += blockDim.x) {
    const int r = e / H.hs, d = e % H.hs, t = first + r;
    const bool in = t < H.Tn;
    a[r][d] = in ? to_f32(x[H.at(bi, t, h, part_a, parts_a) + d]) : 0.0f;
    b[r][d] = in ? to_f32(y[H.at(bi, t, h, part_b, parts_b) + d]) : 0.0f;
  }
}

template <class T>
__global__ void tiled_forward(T* out, float* lse, const T* qkv, Heads H, float scale) {
  __shared__ float ks[kTile][kTiledMaxHeadSize], vs[kTile][kTiledMaxHeadSize];
  const int bh = blockIdx.y, bi = bh / H.NH, h = bh % H.NH, lane = threadIdx.x % 32;
  const int t = blockIdx.x * kRows + threadIdx.x / 32;  // this warp's query row
  const int last_row = min(H.Tn - 1, static_cast<int>(blockIdx.x) * kRows + kRows - 1);
  float q[kPerLane], acc[kPerLane] = {};
  if (t < H.Tn) load_row(q, qkv + H.at(bi, t, h, 0, 3), H.hs, lane);
  float m = -INFINITY, l = 0.0f;
  for (int j0 = 0; j0 <= last_row; j0 += kTile) {
    __syncthreads();
    stage(ks, vs, qkv, qkv, H, bi, h, j0, 1, 3, 2, 3);
    __syncthreads();
    if (t >= H.Tn) continue;  // whole warps only: t is the warp's
    for (int j = j0; j <= min(j0 + kTile - 1, t); ++j) {
      const float s = dot(q, ks[j - j0], H.hs, lane) * scale;
      const float m_new = fmaxf(m, s);
      const float correction = expf(m - m_new);  // 0 on the first key (m = -inf)
      const float p = expf(s - m_new);
      l = l * correction + p;
      for (int i = 0; i < kPerLane; ++i) {
        const int d = lane + 32 * i;
        acc[i] = acc[i] * correction + (d < H.hs ? p * vs[j - j0][d] : 0.0f);
      }
      m = m_new;
    }
  }
  if (t >= H.Tn) return;
  T* o = out + H.at(bi, t, h, 0, 1);
  for (int i = 0; i < kPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < H.hs) o[d] = from_f32<T>(acc[i] / l);
  }
  if (lane == 0) lse[static_cast<std::size_t>(bh) * H.Tn + t] = m + logf(l);
}

// dq for each query row i, and delta_i = dout_i . out_i, which the dk/dv pass needs:
//   p_ij = exp(s_ij - lse_i), dp_ij = dout_i . v_j, ds_ij = p_ij (dp_ij - delta_i), dq_i = scale sum_j ds_ij k_j.
template <class T>
__global__ void tiled_backward_dq(T* dqkv, float* delta, const T* dout, const T* out, const T* qkv, const float* lse,
                                  Heads H, float scale) {
  __shared__ float ks[kTile][kTiledMaxHeadSize], vs[kTile][kTiledMaxHeadSize];
  const int bh = blockIdx.y, bi = bh / H.NH, h = bh % H.NH, lane = threadIdx.x % 32;
  const int t = blockIdx.x * kRows + threadIdx.x / 32;
  const int last_row = min(H.Tn - 1, static_cast<int>(blockIdx.x) * kRows + kRows - 1);
  float q[kPerLane], d_out[kPerLane], o[kPerLane], dq[kPerLane] = {};
  float row_lse = 0.0f, row_delta = 0.0f;
  if (t < H.Tn) {
    load_row(q, qkv + H.at(bi, t, h, 0, 3), H.hs, lane);
    load_row(d_out, dout + H.at(bi, t, h, 0, 1), H.hs, lane);
    load_row(o, out + H.at(bi, t, h, 0, 1), H.hs, lane);
    float part = 0.0f;
    for (int i = 0; i < kPerLane; ++i) part += d_out[i] * o[i];
    row_delta = warp_reduce(part, SumOp{});
    row_lse = lse[static_cast<std::size_t>(bh) * H.Tn + t];
    if (lane == 0) delta[static_cast<std::size_t>(bh) * H.Tn + t] = row_delta;
  }
  for (int j0 = 0; j0 <= last_row; j0 += kTile) {
    __syncthreads();
    stage(ks, vs, qkv, qkv, H, bi, h, j0, 1, 3, 2, 3);
    __syncthreads();
    if (t >= H.Tn) continue;
    for (int j = j0; j <= min(j0 + kTile - 1, t); ++j) {
      const float p = expf(dot(q, ks[j - j0], H.hs, lane) * scale - row_lse);
      const float ds = p * (dot(d_out, vs[j - j0], H.hs, lane) - row_delta);
      for (int i = 0; i < kPerLane; ++i) {
        const int d = lane + 32 * i;
        if (d < H.hs) dq[i] += ds * ks[j - j0][d];
      }
    }
  }
  if (t >= H.Tn) return;
  T* dst = dqkv + H.at(bi, t, h, 0, 3);
  for (int i = 0; i < kPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < H.hs) dst[d] = from_f32<T>(dq[i] * scale);
  }
}

// dk and dv for each key row j, over the query rows i >= j:
//   dv_j = sum_i p_ij dout_i, dk_j = scale sum_i ds_ij q_i.
template <class T>
__global__ void tiled_backward_dkv(T* dqkv, const T* dout, const T* qkv, const float* lse, const float* delta, Heads H,
                                   float scale) {
  __shared__ float qs[kTile][kTiledMaxHeadSize], dos[kTile][kTiledMaxHeadSize];
  __shared__ float lses[kTile], deltas[kTile];
  const int bh = blockIdx.y, bi = bh / H.NH, h = bh % H.NH, lane = threadIdx.x % 32;
  const int first_row = blockIdx.x * kRows, j = first_row + threadIdx.x / 32;  // this warp's key row
  float k[kPerLane], v[kPerLane], dk[kPerLane] = {}, dv[kPerLane] = {};
  if (j < H.Tn) {
    load_row(k, qkv + H.at(bi, j, h, 1, 3), H.hs, lane);
    load_row(v, qkv + H.at(bi, j, h, 2, 3), H.hs, lane);
  }
  for (int i0 = first_row; i0 < H.Tn; i0 += kTile) {
    __syncthreads();
    stage(qs, dos, qkv, dout, H, bi, h, i0, 0, 3, 0, 1);
    for (int r = threadIdx.x; r < kTile; r += blockDim.x) {
      const bool in = i0 + r < H.Tn;
      lses[r] = in ? lse[static_cast<std::size_t>(bh) * H.Tn + i0 + r] : 0.0f;
      deltas[r] = in ? delta[static_cast<std::size_t>(bh) * H.Tn + i0 + r] : 0.0f;
    }
    __syncthreads();
    if (j >= H.Tn) continue;
    for (int i = max(i0, j); i <= min(i0 + kTile - 1, H.Tn - 1); ++i) {
      const int r = i - i0;
      const float p = expf(dot(k, qs[r], H.hs, lane) * scale - lses[r]);
      const float ds = p * (dot(v, dos[r], H.hs, lane) - deltas[r]);
      for (int c = 0; c < kPerLane; ++c) {
        const int d = lane + 32 * c;
        if (d < H.hs) {
          dv[c] += p * dos[r][d];
          dk[c] += ds * qs[r][d];
        }
      }
    }
  }
  if (j >= H.Tn) return;
  T* dst_k = dqkv + H.at(bi, j, h, 1, 3);
  T* dst_v = dqkv + H.at(bi, j, h, 2, 3);
  for (int c = 0; c < kPerLane; ++c) {
    const int d = lane + 32 * c;
    if (d < H.hs) {
      dst_k[d] = from_f32<T>(dk[c] * scale);
      dst_v[d] = from_f32<T>(dv[c]);
    }
  }
}

Heads heads(int Tn, int C, int NH) {
  if (NH < 1 || C % NH != 0 || C / NH > kTiledMaxHeadSize)
    throw CudaError("attention_tiled: C = " + std::to_string(C) + " over NH = " + std::to_string(NH) +
                    " heads; the tiled kernel needs whole heads of at most " + std::to_string(kTiledMaxHeadSize) +
                    " channels");
  return {Tn, C, NH, C / NH};
}

dim3 grid(int B, int Tn, int NH) { return dim3((Tn + kRows - 1) / kRows, B * NH); }

}  // namespace

template <class T>
void attention_tiled_forward(T* out, float* lse, const T* qkv, int B, int Tn, int C, int NH, cudaStream_t stream) {
  const Heads H = heads(Tn, C, NH);
  tiled_forward<T><<<grid(B, Tn, NH), kRows * 32, 0, stream>>>(out, lse, qkv, H, 1.0f / std::sqrt(float(H.hs)));
  MERIDIAN_CUDA_LAUNCHED();
}

template <class T>
void attention_tiled_backward(T* dqkv, const T* dout, const T* out, const T* qkv, const float* lse, int B, int Tn,
                              int C, int NH, cudaStream_t stream) {
  const Heads H = heads(Tn, C, NH);
  const float scale = 1.0f / std::sqrt(float(H.hs));
  StreamScratch<float> delta(static_cast<std::size_t>(B) * NH * Tn, stream);
  tiled_backward_dq<T><<<grid(B, Tn, NH), kRows * 32, 0, stream>>>(dqkv, delta.data(), dout, out, qkv, lse, H, scale);
  MERIDIAN_CUDA_LAUNCHED();
  tiled_backward_dkv<T><<<grid(B, Tn, NH), kRows * 32, 0, stream>>>(dqkv, dout, qkv, lse, delta.data(), H, scale);
  MERIDIAN_CUDA_LAUNCHED();
}

#define MERIDIAN_ATTENTION_TILED(T)                                                                       \
  template void attention_tiled_forward<T>(T*, float*, const T*, int, int, int, int, cudaStream_t);       \
  template void attention_tiled_backward<T>(T*, const T*, const T*, const T*, const float*, int, int, int, \
                                            int, cudaStream_t);
MERIDIAN_ATTENTION_TILED(float)
MERIDIAN_ATTENTION_TILED(__nv_bfloat16)
MERIDIAN_ATTENTION_TILED(__half)
#undef MERIDIAN_ATTENTION_TILED

}  // namespace meridian::kernels::cuda
