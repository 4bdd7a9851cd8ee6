#pragma once
// Elementwise maps, out[i] = f(a[i], b[i]) for i < n (b may be null: f then sees 0), 16 bytes a
// thread: where out, a and b are 16-byte aligned, whole packs of 16 / sizeof(T) elements move by
// 16-byte loads and stores and the tail one element a thread; elsewhere one element a thread
// throughout. Each element goes through the same float operations either way, so the path taken
// never changes a bit of the result. Included by .cu files only.
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_math.cuh"

namespace meridian::kernels::cuda {

template <class T>
struct alignas(16) Pack {
  static constexpr int kSize = static_cast<int>(16 / sizeof(T));
  T v[kSize];
};

template <class T, class F>
__global__ void map_packs(T* out, const T* a, const T* b, std::size_t packs, F f) {
  const std::size_t p = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (p >= packs) return;
  const Pack<T> x = reinterpret_cast<const Pack<T>*>(a)[p];
  Pack<T> y;
  if (b != nullptr) y = reinterpret_cast<const Pack<T>*>(b)[p];
  Pack<T> r;
#pragma unroll
  for (int k = 0; k < Pack<T>::kSize; ++k)
    r.v[k] = from_f32<T>(f(to_f32(x.v[k]), b != nullptr ? to_f32(y.v[k]) : 0.0f));
  reinterpret_cast<Pack<T>*>(out)[p] = r;
}

template <class T, class F>
__global__ void map_each(T* out, const T* a, const T* b, std::size_t first, std::size_t n, F f) {
  const std::size_t i = first + blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  out[i] = from_f32<T>(f(to_f32(a[i]), b != nullptr ? to_f32(b[i]) : 0.0f));
}

template <class T, class F>
void map_elements(T* out, const T* a, const T* b, std::size_t n, F f, cudaStream_t stream) {
  constexpr unsigned kThreads = 256;
  if (n == 0) return;
  const auto address = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p); };
  const bool aligned = (address(out) | address(a) | address(b)) % 16 == 0;
  const std::size_t packs = aligned ? n / Pack<T>::kSize : 0;
  if (packs > 0) {
    map_packs<<<grid_for(packs, kThreads), kThreads, 0, stream>>>(out, a, b, packs, f);
    MERIDIAN_CUDA_LAUNCHED();
  }
  const std::size_t first = packs * Pack<T>::kSize;
  if (first < n) {
    map_each<<<grid_for(n - first, kThreads), kThreads, 0, stream>>>(out, a, b, first, n, f);
    MERIDIAN_CUDA_LAUNCHED();
  }
}

}  // namespace meridian::kernels::cuda
