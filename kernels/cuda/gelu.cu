#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/gelu.hpp"

namespace meridian::kernels::cuda {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
constexpr unsigned kThreads = 256;

template <class T>
__global__ void gelu_forward_kernel(T* out, const T* inp, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float x = to_f32(inp[i]);
  out[i] = from_f32<T>(0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kCubic * x * x * x))));
}

template <class T>
__global__ void gelu_backward_kernel(T* dinp, const T* inp, const T* dout, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float x = to_f32(inp[i]);
  const float th = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
  const float sech2 = 1.0f - th * th;
  const float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
  dinp[i] = from_f32<T>(grad * to_f32(dout[i]));
}

}  // namespace

template <class T>
void gelu_forward(T* out, const T* inp, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  gelu_forward_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(out, inp, n);
  MERIDIAN_CUDA_LAUNCHED();
}

template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  gelu_backward_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(dinp, inp, dout, n);
  MERIDIAN_CUDA_LAUNCHED();
}

template void gelu_forward<float>(float*, const float*, std::size_t, cudaStream_t);
template void gelu_forward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, std::size_t, cudaStream_t);
template void gelu_backward<float>(float*, const float*, const float*, std::size_t, cudaStream_t);
template void gelu_backward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, std::size_t,
                                           cudaStream_t);
template void gelu_forward<__half>(__half*, const __half*, std::size_t, cudaStream_t);
template void gelu_backward<__half>(__half*, const __half*, const __half*, std::size_t, cudaStream_t);

}  // namespace meridian::kernels::cuda
