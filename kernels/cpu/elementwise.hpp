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

// Sum of squares of each `unit`-long slice of x (the last may be shorter) into out[slice], each
// in double and in order: a norm added from these in slice order has the same bits however the
// slices are split among replicas, and on any thread count.
template <class T>
void sum_squares_by_unit(const T* x, std::size_t n, std::size_t unit, double* out);

// x *= s
template <class T>
void scale(T* x, std::size_t n, T s);

}  // namespace meridian::kernels
