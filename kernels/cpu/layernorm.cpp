#include "kernels/cpu/layernorm.hpp"

#include <cmath>
#include <cstddef>

namespace meridian::kernels {

template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* w, const T* b, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* x = inp + static_cast<std::size_t>(n) * C;
    T m = 0;
    for (int c = 0; c < C; ++c) m += x[c];
    m /= C;
    T var = 0;
    for (int c = 0; c < C; ++c) var += (x[c] - m) * (x[c] - m);
    var /= C;
    const T s = T(1) / std::sqrt(var + static_cast<T>(kLayerNormEps));
    T* o = out + static_cast<std::size_t>(n) * C;
    for (int c = 0; c < C; ++c) o[c] = (x[c] - m) * s * w[c] + b[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

template <class T>
void layernorm_backward(T* dinp, T* dw, T* db, const T* dout, const T* inp, const T* w, const T* mean,
                        const T* rstd, int N, int C) {
  // Input gradients: rows are independent.
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* d = dout + static_cast<std::size_t>(n) * C;
    const T* x = inp + static_cast<std::size_t>(n) * C;
    const T m = mean[n], s = rstd[n];
    T dnorm_mean = 0, dnorm_norm_mean = 0;
    for (int c = 0; c < C; ++c) {
      const T dnorm = d[c] * w[c];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * (x[c] - m) * s;
    }
    dnorm_mean /= C;
    dnorm_norm_mean /= C;
    T* di = dinp + static_cast<std::size_t>(n) * C;
    for (int c = 0; c < C; ++c) {
      const T norm = (x[c] - m) * s;
      di[c] += (d[c] * w[c] - dnorm_mean - norm * dnorm_norm_mean) * s;
    }
  }
  // Parameter gradients sum over rows: each thread owns a slice of channels, rows in fixed order.
#pragma omp parallel for schedule(static)
  for (int c0 = 0; c0 < C; c0 += 16) {
    const int c1 = c0 + 16 < C ? c0 + 16 : C;
    for (int n = 0; n < N; ++n) {
      const T* d = dout + static_cast<std::size_t>(n) * C;
      const T* x = inp + static_cast<std::size_t>(n) * C;
      const T m = mean[n], s = rstd[n];
      for (int c = c0; c < c1; ++c) {
        dw[c] += (x[c] - m) * s * d[c];
        db[c] += d[c];
      }
    }
  }
}

template void layernorm_forward<float>(float*, float*, float*, const float*, const float*, const float*, int, int);
template void layernorm_forward<double>(double*, double*, double*, const double*, const double*, const double*, int,
                                        int);
template void layernorm_backward<float>(float*, float*, float*, const float*, const float*, const float*,
                                        const float*, const float*, int, int);
template void layernorm_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                         const double*, const double*, int, int);

}  // namespace meridian::kernels
