#pragma once
// What the CUDA kernel parity suites share: random inputs representable in the compute type,
// uploads and downloads through it, and the tolerances (worst |gpu - cpu| over max |cpu|):
//   fp32 (T = float): 1e-5;
//   bf16 (T = __nv_bfloat16): inputs are bf16 values (the CPU twin gets the same values in fp32);
//     bf16 outputs 3e-2 (a few bf16 roundings of 2^-9 each, chained), fp32 outputs (weight
//     gradients, losses, statistics) 1e-4.
#include <cuda_bf16.h>

#include <bit>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/elementwise.hpp"
#include "tests/support/cuda_parity.hpp"

namespace meridian::testing::kernel_parity {

namespace cpu = meridian::kernels;
namespace gpu = meridian::kernels::cuda;
using bf16 = __nv_bfloat16;
using gpu::DeviceBuffer;
using meridian::testing::have_gpu;
using meridian::testing::normal_floats;
using meridian::testing::random_tokens;

constexpr double kFp32Tol = 1e-5;
constexpr double kBf16Tol = 3e-2;
constexpr double kMixedTol = 1e-4;

template <class T>
constexpr double tol() {
  return std::is_same_v<T, float> ? kFp32Tol : kBf16Tol;
}
template <class T>
constexpr double wide_tol() {  // fp32 outputs computed from T inputs
  return std::is_same_v<T, float> ? kFp32Tol : kMixedTol;
}

inline float round_bf16(float x) {  // nearest even, as __float2bfloat16_rn does for finite x
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return std::bit_cast<float>(u & 0xFFFF0000u);
}

// Normal values (times `scale`), representable in T.
template <class T>
std::vector<float> inputs(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  auto v = normal_floats(n, seed, scale);
  if constexpr (!std::is_same_v<T, float>)
    for (auto& x : v) x = round_bf16(x);
  return v;
}

template <class T>
DeviceBuffer<T> upload(const std::vector<float>& host) {
  if constexpr (std::is_same_v<T, float>) {
    return DeviceBuffer<float>(host);
  } else {
    DeviceBuffer<float> wide(host);
    DeviceBuffer<T> out(host.size());
    gpu::round_to_bf16(out.data(), wide.data(), host.size(), nullptr);
    return out;
  }
}

template <class T>
std::vector<float> download(const DeviceBuffer<T>& d) {
  if constexpr (std::is_same_v<T, float>) {
    return d.download();
  } else {
    DeviceBuffer<float> wide(d.size());
    gpu::widen_to_f32(wide.data(), d.data(), d.size(), nullptr);
    return wide.download();
  }
}

}  // namespace meridian::testing::kernel_parity
