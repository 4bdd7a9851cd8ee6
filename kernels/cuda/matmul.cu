#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/matmul.hpp"

#include <string>

namespace meridian::kernels::cuda {
namespace {

template <class T>
__global__ void broadcast_rows(T* out, const T* bias, int N, int OUT) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < static_cast<std::size_t>(N) * OUT) out[i] = bias[i % OUT];
}

// The bias gradient sums dout over rows in two fixed-order stages (chunks of rows, then the
// chunks in order): deterministic, and parallel over rows as well as columns, which matters when
// N is thousands of rows and OUT only a few thousand columns.
constexpr int kRowsPerChunk = 64;

template <class T>
__global__ void column_sum_partials(float* partial, const T* dout, int N, int OUT) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= OUT) return;
  const int n0 = blockIdx.y * kRowsPerChunk, n1 = min(n0 + kRowsPerChunk, N);
  float acc = 0.0f;
  for (int n = n0; n < n1; ++n) acc += to_f32(dout[static_cast<std::size_t>(n) * OUT + j]);
  partial[static_cast<std::size_t>(blockIdx.y) * OUT + j] = acc;
}

__global__ void add_partials(float* dbias, const float* partial, int chunks, int OUT) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= OUT) return;
  float acc = 0.0f;
  for (int k = 0; k < chunks; ++k) acc += partial[static_cast<std::size_t>(k) * OUT + j];
  dbias[j] += acc;
}

constexpr unsigned kThreads = 256;

// Seeds the output with the bias, so that the product adds onto it (the beta it returns).
template <class T>
float seed_with_bias(Blas& blas, T* out, const T* bias, int N, int OUT) {
  if (bias == nullptr) return 0.0f;
  broadcast_rows<<<grid_for(static_cast<std::size_t>(N) * OUT, kThreads), kThreads, 0, blas.stream()>>>(out, bias, N,
                                                                                                       OUT);
  MERIDIAN_CUDA_LAUNCHED();
  return 1.0f;
}

template <class T>
void add_column_sums(Blas& blas, float* dbias, const T* dout, int N, int OUT) {
  if (dbias == nullptr) return;
  const int chunks = (N + kRowsPerChunk - 1) / kRowsPerChunk;
  StreamScratch<float> partial(static_cast<std::size_t>(chunks) * OUT, blas.stream());
  column_sum_partials<<<dim3(grid_for(OUT, kThreads), chunks), kThreads, 0, blas.stream()>>>(partial.data(), dout, N,
                                                                                             OUT);
  MERIDIAN_CUDA_LAUNCHED();
  add_partials<<<grid_for(OUT, kThreads), kThreads, 0, blas.stream()>>>(dbias, partial.data(), chunks, OUT);
  MERIDIAN_CUDA_LAUNCHED();
}

}  // namespace

template <class T>
void matmul_forward(Blas& blas, T* out, const T* inp, const T* w, const T* bias, int N, int IN, int OUT) {
  if (bias != nullptr && gemm_bias<T, T>(blas, false, false, N, OUT, IN, inp, IN, w, OUT, bias, out, OUT)) return;
  const float beta = seed_with_bias(blas, out, bias, N, OUT);
  gemm<T, T>(blas, false, false, N, OUT, IN, 1.0f, inp, IN, w, OUT, beta, out, OUT);
}

template <class T>
void matmul_backward(Blas& blas, T* dinp, float* dw, float* dbias, const T* dout, const T* inp, const T* w, int N,
                     int IN, int OUT) {
  if (dinp != nullptr) gemm<T, T>(blas, false, true, N, IN, OUT, 1.0f, dout, OUT, w, OUT, 0.0f, dinp, IN);
  gemm<T, float>(blas, true, false, IN, OUT, N, 1.0f, inp, IN, dout, OUT, 1.0f, dw, OUT);
  add_column_sums(blas, dbias, dout, N, OUT);
}

template <class T>
void matmul_nt_forward(Blas& blas, T* out, const T* inp, const T* w, const T* bias, int N, int IN, int OUT,
                       int ld_out) {
  if (bias != nullptr && ld_out != 0 && ld_out != OUT)
    throw CudaError("matmul_nt_forward: a bias needs rows of stride OUT=" + std::to_string(OUT) + ", not " +
                    std::to_string(ld_out));
  if (bias != nullptr && gemm_bias<T, T>(blas, false, true, N, OUT, IN, inp, IN, w, IN, bias, out, OUT)) return;
  const float beta = seed_with_bias(blas, out, bias, N, OUT);
  gemm<T, T>(blas, false, true, N, OUT, IN, 1.0f, inp, IN, w, IN, beta, out, ld_out > 0 ? ld_out : OUT);
}

template <class T>
void matmul_nt_backward(Blas& blas, T* dinp, float* dw, float* dbias, const T* dout, const T* inp, const T* w, int N,
                        int IN, int OUT, int ld_out) {
  if (dbias != nullptr && ld_out != 0 && ld_out != OUT)
    throw CudaError("matmul_nt_backward: a bias needs rows of stride OUT=" + std::to_string(OUT) + ", not " +
                    std::to_string(ld_out));
  const int ld = ld_out > 0 ? ld_out : OUT;
  if (dinp != nullptr) gemm<T, T>(blas, false, false, N, IN, OUT, 1.0f, dout, ld, w, IN, 0.0f, dinp, IN);
  gemm<T, float>(blas, true, false, OUT, IN, N, 1.0f, dout, ld, inp, IN, 1.0f, dw, IN);
  add_column_sums(blas, dbias, dout, N, OUT);
}

#define MERIDIAN_MATMUL(T)                                                                                     \
  template void matmul_forward<T>(Blas&, T*, const T*, const T*, const T*, int, int, int);                     \
  template void matmul_backward<T>(Blas&, T*, float*, float*, const T*, const T*, const T*, int, int, int);    \
  template void matmul_nt_forward<T>(Blas&, T*, const T*, const T*, const T*, int, int, int, int);             \
  template void matmul_nt_backward<T>(Blas&, T*, float*, float*, const T*, const T*, const T*, int, int, int, int);
MERIDIAN_MATMUL(float)
MERIDIAN_MATMUL(__nv_bfloat16)
MERIDIAN_MATMUL(__half)
#undef MERIDIAN_MATMUL

}  // namespace meridian::kernels::cuda
