#pragma once
// exp/tanh that GCC auto-vectorizes. glibc's expf/tanhf are scalar calls unless -ffast-math is
// on, and GELU alone evaluates ~1M tanh per training step of the reference model. For double
// (the gradient-check reference) the exact std functions are used.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace meridian::kernels {

// exp(x) for float: range reduction x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial for e^r,
// and 2^n built from the exponent bits. Max relative error ~2e-7 on [-87, 88].
inline float fast_exp(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to the nearest integer
  const float n = (x * 1.44269504088896341f + magic) - magic;
  const float r = (x - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

template <class T>
inline T exp_(T x) {
  if constexpr (sizeof(T) == sizeof(float)) return fast_exp(x);
  else return std::exp(x);
}

// tanh(u) = 1 - 2 / (e^{2u} + 1): saturates correctly at both ends since fast_exp clamps.
template <class T>
inline T tanh_(T u) {
  if constexpr (sizeof(T) == sizeof(float)) return 1.0f - 2.0f / (fast_exp(2.0f * u) + 1.0f);
  else return std::tanh(u);
}

}  // namespace meridian::kernels
