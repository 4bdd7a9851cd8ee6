#include "kernels/cpu/rope.hpp"

#include <cmath>
#include <cstddef>

namespace meridian::kernels {

template <class T>
void rope_table(T* cos, T* sin, const std::vector<double>& inv_freq, int Tn) {
  const std::size_t half = inv_freq.size();
  for (int t = 0; t < Tn; ++t)
    for (std::size_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(t) * static_cast<float>(inv_freq[i]);
      cos[t * half + i] = static_cast<T>(std::cos(static_cast<double>(angle)));
      sin[t * half + i] = static_cast<T>(std::sin(static_cast<double>(angle)));
    }
}

namespace {

// sign +1 turns by the angle, -1 back.
template <class T>
void rotate(T* x, const T* cos, const T* sin, int B, int Tn, int heads, int hs, int ld, T sign) {
  const int half = hs / 2;
#pragma omp parallel for schedule(static)
  for (int bt = 0; bt < B * Tn; ++bt) {
    const int t = bt % Tn;
    const T* c = cos + static_cast<std::size_t>(t) * half;
    const T* s = sin + static_cast<std::size_t>(t) * half;
    for (int h = 0; h < heads; ++h) {
      T* x1 = x + static_cast<std::size_t>(bt) * ld + h * hs;
      T* x2 = x1 + half;
      for (int i = 0; i < half; ++i) {
        const T a = x1[i], b = x2[i], si = sign * s[i];
        x1[i] = a * c[i] - b * si;
        x2[i] = b * c[i] + a * si;
      }
    }
  }
}

}  // namespace

template <class T>
void rope_forward(T* x, const T* cos, const T* sin, int B, int Tn, int heads, int hs, int ld) {
  rotate(x, cos, sin, B, Tn, heads, hs, ld, T(1));
}

template <class T>
void rope_backward(T* dx, const T* cos, const T* sin, int B, int Tn, int heads, int hs, int ld) {
  rotate(dx, cos, sin, B, Tn, heads, hs, ld, T(-1));
}

template void rope_table<float>(float*, float*, const std::vector<double>&, int);
template void rope_table<double>(double*, double*, const std::vector<double>&, int);
template void rope_forward<float>(float*, const float*, const float*, int, int, int, int, int);
template void rope_forward<double>(double*, const double*, const double*, int, int, int, int, int);
template void rope_backward<float>(float*, const float*, const float*, int, int, int, int, int);
template void rope_backward<double>(double*, const double*, const double*, int, int, int, int, int);

}  // namespace meridian::kernels
