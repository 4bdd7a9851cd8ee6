#include "kernels/cpu/rmsnorm.hpp"

#include <cmath>
#include <cstddef>

namespace meridian::kernels {

template <class T>
void rmsnorm_forward(T* out, T* rstd, const T* inp, const T* w, int N, int C, double eps) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* x = inp + static_cast<std::size_t>(n) * C;
    T ss = 0;
    for (int c = 0; c < C; ++c) ss += x[c] * x[c];
    const T s = T(1) / std::sqrt(ss / C + static_cast<T>(eps));
    T* o = out + static_cast<std::size_t>(n) * C;
    for (int c = 0; c < C; ++c) o[c] = w[c] * (x[c] * s);
    rstd[n] = s;
  }
}

template <class T>
void rmsnorm_backward(T* dinp, T* dw, const T* dout, const T* inp, const T* w, const T* rstd, int N, int C) {
  // With n = x * s: dx = s * (dout * w - n * mean(dout * w * n)).
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* d = dout + static_cast<std::size_t>(n) * C;
    const T* x = inp + static_cast<std::size_t>(n) * C;
    const T s = rstd[n];
    T dot = 0;
    for (int c = 0; c < C; ++c) dot += d[c] * w[c] * x[c] * s;
    dot /= C;
    T* di = dinp + static_cast<std::size_t>(n) * C;
    for (int c = 0; c < C; ++c) di[c] += s * (d[c] * w[c] - x[c] * s * dot);
  }
  // The gains' gradient sums over rows: each thread owns a slice of channels, rows in fixed order.
#pragma omp parallel for schedule(static)
  for (int c0 = 0; c0 < C; c0 += 16) {
    const int c1 = c0 + 16 < C ? c0 + 16 : C;
    for (int n = 0; n < N; ++n) {
      const T* d = dout + static_cast<std::size_t>(n) * C;
      const T* x = inp + static_cast<std::size_t>(n) * C;
      for (int c = c0; c < c1; ++c) dw[c] += x[c] * rstd[n] * d[c];
    }
  }
}

template void rmsnorm_forward<float>(float*, float*, const float*, const float*, int, int, double);
template void rmsnorm_forward<double>(double*, double*, const double*, const double*, int, int, double);
template void rmsnorm_backward<float>(float*, float*, const float*, const float*, const float*, const float*, int, int);
template void rmsnorm_backward<double>(double*, double*, const double*, const double*, const double*, const double*,
                                       int, int);

}  // namespace meridian::kernels
