#include "kernels/cpu/newton_schulz.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/gemm.hpp"

namespace meridian::kernels {

template <class T>
void newton_schulz(const T* g, T* out, int rows, int cols, int steps, T* work) {
  const long n = static_cast<long>(rows) * cols;
  // Work on X = G (rows <= cols) or X = G^T, so that A = X X^T is m x m with m the smaller side.
  const bool transposed = rows > cols;
  const int m = transposed ? cols : rows, k = transposed ? rows : cols;
  T* a = work;                             // m x m
  T* b = work + static_cast<long>(m) * m;  // m x m
  T* x = b + static_cast<long>(m) * m;     // m x k, the iterate
  double norm = 0;
  for (long i = 0; i < n; ++i) norm += static_cast<double>(g[i]) * static_cast<double>(g[i]);
  const T scale = static_cast<T>(1.0 / (std::sqrt(norm) + 1e-7));
  if (transposed) {
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) x[static_cast<long>(c) * rows + r] = g[static_cast<long>(r) * cols + c] * scale;
  } else {
    for (long i = 0; i < n; ++i) x[i] = g[i] * scale;
  }
  constexpr T ca = static_cast<T>(3.4445), cb = static_cast<T>(-4.7750), cc = static_cast<T>(2.0315);
  for (int s = 0; s < steps; ++s) {
    gemm<T>(false, true, m, m, k, T(1), x, k, x, k, T(0), a, m);         // A = X X^T
    gemm<T>(false, false, m, m, m, cc, a, m, a, m, T(0), b, m);          // B = c A A
    for (long i = 0; i < static_cast<long>(m) * m; ++i) b[i] += cb * a[i];  // B += b A
    // X <- a X + B X: out holds the product, then X takes it.
    std::copy(x, x + n, out);
    gemm<T>(false, false, m, k, m, T(1), b, m, out, k, ca, x, k);
  }
  if (transposed) {
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) out[static_cast<long>(r) * cols + c] = x[static_cast<long>(c) * rows + r];
  } else {
    std::copy(x, x + n, out);
  }
}

template void newton_schulz<float>(const float*, float*, int, int, int, float*);
template void newton_schulz<double>(const double*, double*, int, int, int, double*);

}  // namespace meridian::kernels
