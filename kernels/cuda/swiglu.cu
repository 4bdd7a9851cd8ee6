#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/swiglu.hpp"

namespace meridian::kernels::cuda {
namespace {

constexpr unsigned kThreads = 256;

template <class T>
__global__ void swiglu_forward_kernel(T* out, const T* gate_up, int N, int F) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<std::size_t>(N) * F) return;
  const std::size_t n = i / F, j = i % F;
  const float g = to_f32(gate_up[n * 2 * F + j]), u = to_f32(gate_up[n * 2 * F + F + j]);
  out[i] = from_f32<T>(g / (1.0f + expf(-g)) * u);
}

template <class T>
__global__ void swiglu_backward_kernel(T* dgate_up, const T* gate_up, const T* dout, int N, int F) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<std::size_t>(N) * F) return;
  const std::size_t n = i / F, j = i % F;
  const float g = to_f32(gate_up[n * 2 * F + j]), u = to_f32(gate_up[n * 2 * F + F + j]), d = to_f32(dout[i]);
  const float sig = 1.0f / (1.0f + expf(-g));
  dgate_up[n * 2 * F + j] = from_f32<T>(d * u * sig * (1.0f + g * (1.0f - sig)));
  dgate_up[n * 2 * F + F + j] = from_f32<T>(d * g * sig);
}

}  // namespace

template <class T>
void swiglu_forward(T* out, const T* gate_up, int N, int F, cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(N) * F;
  if (n == 0) return;
  swiglu_forward_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(out, gate_up, N, F);
  MERIDIAN_CUDA_LAUNCHED();
}

template <class T>
void swiglu_backward(T* dgate_up, const T* gate_up, const T* dout, int N, int F, cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(N) * F;
  if (n == 0) return;
  swiglu_backward_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(dgate_up, gate_up, dout, N, F);
  MERIDIAN_CUDA_LAUNCHED();
}

#define MERIDIAN_SWIGLU(T)                                                                        \
  template void swiglu_forward<T>(T*, const T*, int, int, cudaStream_t);                           \
  template void swiglu_backward<T>(T*, const T*, const T*, int, int, cudaStream_t);
MERIDIAN_SWIGLU(float)
MERIDIAN_SWIGLU(__nv_bfloat16)
MERIDIAN_SWIGLU(__half)
#undef MERIDIAN_SWIGLU

}  // namespace meridian::kernels::cuda
