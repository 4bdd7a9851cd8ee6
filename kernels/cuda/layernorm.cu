#include "kernels/cpu/layernorm.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/layernorm.hpp"

namespace meridian::kernels::cuda {
namespace {

constexpr unsigned kWarpsPerBlock = 8;
constexpr int kRowsPerChunk = 64;
constexpr unsigned kThreads = 256;

// One warp per row; two passes over the row like the CPU twin (mean, then centred variance).
template <class T>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* inp, const T* w, const T* b,
                                         int N, int C) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= N) return;
  const T* x = inp + static_cast<std::size_t>(row) * C;
  float sum = 0.0f;
  for (int c = lane; c < C; c += 32) sum += to_f32(x[c]);
  const float m = warp_reduce(sum, SumOp{}) / C;
  float var = 0.0f;
  for (int c = lane; c < C; c += 32) {
    const float d = to_f32(x[c]) - m;
    var += d * d;
  }
  var = warp_reduce(var, SumOp{}) / C;
  const float s = 1.0f / sqrtf(var + static_cast<float>(kLayerNormEps));
  T* o = out + static_cast<std::size_t>(row) * C;
  for (int c = lane; c < C; c += 32) o[c] = from_f32<T>((to_f32(x[c]) - m) * s * to_f32(w[c]) + to_f32(b[c]));
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

template <class T>
__global__ void layernorm_input_grad_kernel(T* dinp, const T* dout, const T* inp, const T* w, const float* mean,
                                            const float* rstd, int N, int C) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= N) return;
  const T* d = dout + static_cast<std::size_t>(row) * C;
  const T* x = inp + static_cast<std::size_t>(row) * C;
  const float m = mean[row], s = rstd[row];
  float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
  for (int c = lane; c < C; c += 32) {
    const float dnorm = to_f32(d[c]) * to_f32(w[c]);
    dnorm_mean += dnorm;
    dnorm_norm_mean += dnorm * (to_f32(x[c]) - m) * s;
  }
  dnorm_mean = warp_reduce(dnorm_mean, SumOp{}) / C;
  dnorm_norm_mean = warp_reduce(dnorm_norm_mean, SumOp{}) / C;
  T* di = dinp + static_cast<std::size_t>(row) * C;
  for (int c = lane; c < C; c += 32) {
    const float norm = (to_f32(x[c]) - m) * s;
    di[c] = from_f32<T>(to_f32(di[c]) + (to_f32(d[c]) * to_f32(w[c]) - dnorm_mean - norm * dnorm_norm_mean) * s);
  }
}

// Stage 1: partial column sums over one chunk of rows (grid.y = chunk), coalesced along C.
template <class T>
__global__ void layernorm_param_partials(float* pdw, float* pdb, const T* dout, const T* inp, const float* mean,
                                         const float* rstd, int N, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int n0 = blockIdx.y * kRowsPerChunk, n1 = min(n0 + kRowsPerChunk, N);
  float sw = 0.0f, sb = 0.0f;
  for (int n = n0; n < n1; ++n) {
    const float d = to_f32(dout[static_cast<std::size_t>(n) * C + c]);
    sw += (to_f32(inp[static_cast<std::size_t>(n) * C + c]) - mean[n]) * rstd[n] * d;
    sb += d;
  }
  pdw[static_cast<std::size_t>(blockIdx.y) * C + c] = sw;
  pdb[static_cast<std::size_t>(blockIdx.y) * C + c] = sb;
}

// Stage 2: the chunks in order.
__global__ void layernorm_param_sum(float* dw, float* db, const float* pdw, const float* pdb, int chunks, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float sw = 0.0f, sb = 0.0f;
  for (int k = 0; k < chunks; ++k) {
    sw += pdw[static_cast<std::size_t>(k) * C + c];
    sb += pdb[static_cast<std::size_t>(k) * C + c];
  }
  dw[c] += sw;
  db[c] += sb;
}

}  // namespace

template <class T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* w, const T* b, int N, int C,
                       cudaStream_t stream) {
  layernorm_forward_kernel<<<grid_for(N, kWarpsPerBlock), kWarpsPerBlock * 32, 0, stream>>>(out, mean, rstd, inp, w,
                                                                                            b, N, C);
  MERIDIAN_CUDA_LAUNCHED();
}

template <class T>
void layernorm_backward(T* dinp, float* dw, float* db, const T* dout, const T* inp, const T* w, const float* mean,
                        const float* rstd, int N, int C, cudaStream_t stream) {
  layernorm_input_grad_kernel<<<grid_for(N, kWarpsPerBlock), kWarpsPerBlock * 32, 0, stream>>>(dinp, dout, inp, w,
                                                                                               mean, rstd, N, C);
  MERIDIAN_CUDA_LAUNCHED();
  const int chunks = (N + kRowsPerChunk - 1) / kRowsPerChunk;
  StreamScratch<float> partial(2 * static_cast<std::size_t>(chunks) * C, stream);
  float* pdw = partial.data();
  float* pdb = pdw + static_cast<std::size_t>(chunks) * C;
  layernorm_param_partials<<<dim3(grid_for(C, kThreads), chunks), kThreads, 0, stream>>>(pdw, pdb, dout, inp, mean,
                                                                                         rstd, N, C);
  MERIDIAN_CUDA_LAUNCHED();
  layernorm_param_sum<<<grid_for(C, kThreads), kThreads, 0, stream>>>(dw, db, pdw, pdb, chunks, C);
  MERIDIAN_CUDA_LAUNCHED();
}

#define MERIDIAN_LAYERNORM(T)                                                                                  \
  template void layernorm_forward<T>(T*, float*, float*, const T*, const T*, const T*, int, int, cudaStream_t); \
  template void layernorm_backward<T>(T*, float*, float*, const T*, const T*, const T*, const float*,           \
                                      const float*, int, int, cudaStream_t);
MERIDIAN_LAYERNORM(float)
MERIDIAN_LAYERNORM(__nv_bfloat16)
MERIDIAN_LAYERNORM(__half)
#undef MERIDIAN_LAYERNORM

}  // namespace meridian::kernels::cuda
