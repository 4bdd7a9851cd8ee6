#include "kernels/cpu/elementwise.hpp"

#include <array>

namespace meridian::kernels {

template <class T>
void add(T* out, const T* a, const T* b, std::size_t n) {
#pragma omp parallel for simd schedule(static)
  for (std::size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <class T>
double sum_squares(const T* x, std::size_t n) {
  constexpr int kChunks = 64;  // fixed, so the summation order is the same on any thread count
  std::array<double, kChunks> partial{};
  const std::size_t per = (n + kChunks - 1) / kChunks;
#pragma omp parallel for schedule(static)
  for (int c = 0; c < kChunks; ++c) {
    const std::size_t lo = c * per, hi = lo + per < n ? lo + per : n;
    double s = 0;
    for (std::size_t i = lo; i < hi; ++i) s += static_cast<double>(x[i]) * x[i];
    partial[c] = s;
  }
  double total = 0;
  for (double p : partial) total += p;
  return total;
}

template <class T>
void sum_squares_by_unit(const T* x, std::size_t n, std::size_t unit, double* out) {
  const auto units = static_cast<std::ptrdiff_t>((n + unit - 1) / unit);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t u = 0; u < units; ++u) {
    const std::size_t lo = static_cast<std::size_t>(u) * unit, hi = lo + unit < n ? lo + unit : n;
    double s = 0;
    for (std::size_t i = lo; i < hi; ++i) s += static_cast<double>(x[i]) * x[i];
    out[u] = s;
  }
}

template <class T>
void scale(T* x, std::size_t n, T s) {
#pragma omp parallel for simd schedule(static)
  for (std::size_t i = 0; i < n; ++i) x[i] *= s;
}

template void add<float>(float*, const float*, const float*, std::size_t);
template void add<double>(double*, const double*, const double*, std::size_t);
template double sum_squares<float>(const float*, std::size_t);
template double sum_squares<double>(const double*, std::size_t);
template void sum_squares_by_unit<float>(const float*, std::size_t, std::size_t, double*);
template void scale<float>(float*, std::size_t, float);
template void scale<double>(double*, std::size_t, double);

}  // namespace meridian::kernels
