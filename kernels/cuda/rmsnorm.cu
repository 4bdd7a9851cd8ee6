#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/rmsnorm.hpp"

namespace meridian::kernels::cuda {
namespace {

constexpr unsigned kWarpsPerBlock = 8;
constexpr int kRowsPerChunk = 64;
constexpr unsigned kThreads = 256;

// One warp per row.
template <class T>
__global__ void rmsnorm_forward_kernel(T* out, float* rstd, const T* inp, const T* w, int N, int C, float eps) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= N) return;
  const T* x = inp + static_cast<std::size_t>(row) * C;
  float ss = 0.0f;
  for (int c = lane; c < C; c += 32) ss += to_f32(x[c]) * to_f32(x[c]);
  const float s = rsqrtf(warp_reduce(ss, SumOp{}) / C + eps);
  T* o = out + static_cast<std::size_t>(row) * C;
  for (int c = lane; c < C; c += 32) o[c] = from_f32<T>(to_f32(w[c]) * (to_f32(x[c]) * s));
  if (lane == 0) rstd[row] = s;
}

// dx = s * (dout * w - x * s * mean(dout * w * x * s))
template <class T>
__global__ void rmsnorm_input_grad_kernel(T* dinp, const T* dout, const T* inp, const T* w, const float* rstd, int N,
                                          int C) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= N) return;
  const T* d = dout + static_cast<std::size_t>(row) * C;
  const T* x = inp + static_cast<std::size_t>(row) * C;
  const float s = rstd[row];
  float dot = 0.0f;
  for (int c = lane; c < C; c += 32) dot += to_f32(d[c]) * to_f32(w[c]) * to_f32(x[c]) * s;
  dot = warp_reduce(dot, SumOp{}) / C;
  T* di = dinp + static_cast<std::size_t>(row) * C;
  for (int c = lane; c < C; c += 32)
    di[c] = from_f32<T>(to_f32(di[c]) + s * (to_f32(d[c]) * to_f32(w[c]) - to_f32(x[c]) * s * dot));
}

// Stage 1: partial column sums of x * s * dout over one chunk of rows (grid.y = chunk).
template <class T>
__global__ void rmsnorm_gain_partials(float* partial, const T* dout, const T* inp, const float* rstd, int N, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int n0 = blockIdx.y * kRowsPerChunk, n1 = min(n0 + kRowsPerChunk, N);
  float acc = 0.0f;
  for (int n = n0; n < n1; ++n)
    acc += to_f32(inp[static_cast<std::size_t>(n) * C + c]) * rstd[n] * to_f32(dout[static_cast<std::size_t>(n) * C + c]);
  partial[static_cast<std::size_t>(blockIdx.y) * C + c] = acc;
}

// Stage 2: the chunks in order.
__global__ void rmsnorm_gain_sum(float* dw, const float* partial, int chunks, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float acc = 0.0f;
  for (int k = 0; k < chunks; ++k) acc += partial[static_cast<std::size_t>(k) * C + c];
  dw[c] += acc;
}

}  // namespace

template <class T>
void rmsnorm_forward(T* out, float* rstd, const T* inp, const T* w, int N, int C, float eps, cudaStream_t stream) {
  rmsnorm_forward_kernel<<<grid_for(N, kWarpsPerBlock), kWarpsPerBlock * 32, 0, stream>>>(out, rstd, inp, w, N, C, eps);
  MERIDIAN_CUDA_LAUNCHED();
}

template <class T>
void rmsnorm_backward(T* dinp, float* dw, const T* dout, const T* inp, const T* w, const float* rstd, int N, int C,
                      cudaStream_t stream) {
  rmsnorm_input_grad_kernel<<<grid_for(N, kWarpsPerBlock), kWarpsPerBlock * 32, 0, stream>>>(dinp, dout, inp, w, rstd,
                                                                                             N, C);
  MERIDIAN_CUDA_LAUNCHED();
  const int chunks = (N + kRowsPerChunk - 1) / kRowsPerChunk;
  StreamScratch<float> partial(static_cast<std::size_t>(chunks) * C, stream);
  rmsnorm_gain_partials<<<dim3(grid_for(C, kThreads), chunks), kThreads, 0, stream>>>(partial.data(), dout, inp, rstd,
                                                                                      N, C);
  MERIDIAN_CUDA_LAUNCHED();
  rmsnorm_gain_sum<<<grid_for(C, kThreads), kThreads, 0, stream>>>(dw, partial.data(), chunks, C);
  MERIDIAN_CUDA_LAUNCHED();
}

#define MERIDIAN_RMSNORM(T)                                                                              \
  template void rmsnorm_forward<T>(T*, float*, const T*, const T*, int, int, float, cudaStream_t);       \
  template void rmsnorm_backward<T>(T*, float*, const T*, const T*, const T*, const float*, int, int,    \
                                    cudaStream_t);
MERIDIAN_RMSNORM(float)
MERIDIAN_RMSNORM(__nv_bfloat16)
MERIDIAN_RMSNORM(__half)
#undef MERIDIAN_RMSNORM

}  // namespace meridian::kernels::cuda
