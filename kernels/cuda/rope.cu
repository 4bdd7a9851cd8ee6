#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/rope.hpp"

namespace meridian::kernels::cuda {
namespace {

constexpr unsigned kThreads = 256;

// One thread per (position, head, pair); sign +1 turns by the angle, -1 back.
template <class T>
__global__ void rotate_kernel(T* x, const float* cos, const float* sin, int BT, int Tn, int heads, int hs, int ld,
                              float sign) {
  const int half = hs / 2;
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<std::size_t>(BT) * heads * half) return;
  const int pair = static_cast<int>(i % half);
  const int h = static_cast<int>(i / half % heads);
  const int bt = static_cast<int>(i / (static_cast<std::size_t>(half) * heads));
  const int t = bt % Tn;
  T* x1 = x + static_cast<std::size_t>(bt) * ld + h * hs + pair;
  T* x2 = x1 + half;
  const float c = cos[t * half + pair], s = sign * sin[t * half + pair];
  const float a = to_f32(*x1), b = to_f32(*x2);
  *x1 = from_f32<T>(a * c - b * s);
  *x2 = from_f32<T>(b * c + a * s);
}

template <class T>
void rotate(T* x, const float* cos, const float* sin, int B, int Tn, int heads, int hs, int ld, float sign,
            cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(B) * Tn * heads * (hs / 2);
  if (n == 0) return;
  rotate_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(x, cos, sin, B * Tn, Tn, heads, hs, ld, sign);
  MERIDIAN_CUDA_LAUNCHED();
}

}  // namespace

template <class T>
void rope_forward(T* x, const float* cos, const float* sin, int B, int Tn, int heads, int hs, int ld,
                  cudaStream_t stream) {
  rotate(x, cos, sin, B, Tn, heads, hs, ld, 1.0f, stream);
}

template <class T>
void rope_backward(T* dx, const float* cos, const float* sin, int B, int Tn, int heads, int hs, int ld,
                   cudaStream_t stream) {
  rotate(dx, cos, sin, B, Tn, heads, hs, ld, -1.0f, stream);
}

#define MERIDIAN_ROPE(T)                                                                                         \
  template void rope_forward<T>(T*, const float*, const float*, int, int, int, int, int, cudaStream_t);          \
  template void rope_backward<T>(T*, const float*, const float*, int, int, int, int, int, cudaStream_t);
MERIDIAN_ROPE(float)
MERIDIAN_ROPE(__nv_bfloat16)
MERIDIAN_ROPE(__half)
#undef MERIDIAN_ROPE

}  // namespace meridian::kernels::cuda
