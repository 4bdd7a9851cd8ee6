#pragma once
#include <cstddef>

namespace meridian::kernels {

// out = a + b
template <class T>
void add(T* out, const T* a, const T* b, std::size_t n);

// Sum of squares in double, in a fixed order that does not depend on the thread count, so that
// gradient-norm clipping is bit-reproducible.
template <class T>
double sum_squares(const T* x, std::size_t n);

// x *= s
template <class T>
void scale(T* x, std::size_t n, T s);

}  // namespace meridian::kernels
