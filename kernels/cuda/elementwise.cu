#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/elementwise.hpp"
#include "kernels/cuda/packed_map.cuh"

namespace meridian::kernels::cuda {
namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kSumBlocks = 512;  // fixed, so the summation order does not depend on the GPU

struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};

__global__ void sum_squares_partials(double* partial, const float* x, std::size_t n) {
  __shared__ double s[kThreads];
  double acc = 0.0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(kSumBlocks) * kThreads) {
    const double v = x[i];
    acc += v * v;
  }
  s[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) s[threadIdx.x] += s[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

__global__ void sum_partials(double* total, const double* partial) {
  double acc = 0.0;
  for (unsigned b = 0; b < kSumBlocks; ++b) acc += partial[b];
  *total = acc;
}

__global__ void scale_kernel(float* x, std::size_t n, float s) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] *= s;
}

__global__ void to_bf16_kernel(__nv_bfloat16* out, const float* in, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16_rn(in[i]);
}

__global__ void to_f16_kernel(__half* out, const float* in, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = __float2half_rn(in[i]);
}

template <class T>
__global__ void to_f32_kernel(float* out, const T* in, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = to_f32(in[i]);
}

__global__ void unscale_kernel(float* g, std::size_t n, float inv_scale, int* overflow) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float before = g[i], after = before * inv_scale;
  g[i] = after;
  if (!isfinite(before) || !isfinite(after)) *overflow = 1;  // any writer: the value is the same
}

}  // namespace

template <class T>
void add(T* out, const T* a, const T* b, std::size_t n, cudaStream_t stream) {
  map_elements(out, a, b, n, Add{}, stream);
}

double sum_squares(const float* x, std::size_t n, cudaStream_t stream) {
  StreamScratch<double> scratch(kSumBlocks + 1, stream);
  sum_squares_partials<<<kSumBlocks, kThreads, 0, stream>>>(scratch.data(), x, n);
  MERIDIAN_CUDA_LAUNCHED();
  sum_partials<<<1, 1, 0, stream>>>(scratch.data() + kSumBlocks, scratch.data());
  MERIDIAN_CUDA_LAUNCHED();
  double total = 0.0;
  MERIDIAN_CUDA(cudaMemcpyAsync(&total, scratch.data() + kSumBlocks, sizeof total, cudaMemcpyDeviceToHost, stream));
  MERIDIAN_CUDA(cudaStreamSynchronize(stream));
  return total;
}

void scale(float* x, std::size_t n, float s, cudaStream_t stream) {
  if (n == 0) return;
  scale_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(x, n, s);
  MERIDIAN_CUDA_LAUNCHED();
}

void round_to_bf16(__nv_bfloat16* out, const float* in, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  to_bf16_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(out, in, n);
  MERIDIAN_CUDA_LAUNCHED();
}

void round_to_f16(__half* out, const float* in, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  to_f16_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(out, in, n);
  MERIDIAN_CUDA_LAUNCHED();
}

void widen_to_f32(float* out, const __nv_bfloat16* in, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  to_f32_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(out, in, n);
  MERIDIAN_CUDA_LAUNCHED();
}

void widen_to_f32(float* out, const __half* in, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  to_f32_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(out, in, n);
  MERIDIAN_CUDA_LAUNCHED();
}

void widen_to_f32(float* out, const float* in, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  MERIDIAN_CUDA(cudaMemcpyAsync(out, in, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
}

bool unscale_gradients(float* g, std::size_t n, float inv_scale, cudaStream_t stream) {
  StreamScratch<int> overflow(1, stream);
  MERIDIAN_CUDA(cudaMemsetAsync(overflow.data(), 0, sizeof(int), stream));
  if (n > 0) {
    unscale_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(g, n, inv_scale, overflow.data());
    MERIDIAN_CUDA_LAUNCHED();
  }
  int host = 0;
  MERIDIAN_CUDA(cudaMemcpyAsync(&host, overflow.data(), sizeof host, cudaMemcpyDeviceToHost, stream));
  MERIDIAN_CUDA(cudaStreamSynchronize(stream));
  return host == 0;
}

template void add<float>(float*, const float*, const float*, std::size_t, cudaStream_t);
template void add<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, std::size_t,
                                 cudaStream_t);
template void add<__half>(__half*, const __half*, const __half*, std::size_t, cudaStream_t);

}  // namespace meridian::kernels::cuda
