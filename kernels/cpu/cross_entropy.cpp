#include "kernels/cpu/cross_entropy.hpp"

#include <cmath>
#include <cstddef>

#include "kernels/cpu/fast_math.hpp"

namespace meridian::kernels {
namespace {

template <class T>
T row_max(const T* x, int V) {
  T m = x[0];
  for (int i = 1; i < V; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

template <class T>
T row_sum_exp(const T* x, T maxv, int V) {
  T s = 0;
  for (int i = 0; i < V; ++i) s += exp_(x[i] - maxv);
  return s;
}

}  // namespace

template <class T>
void cross_entropy_forward(T* losses, const T* logits, const std::int32_t* targets, int N, int V) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* x = logits + static_cast<std::size_t>(n) * V;
    const T maxv = row_max(x, V);
    const T sum = row_sum_exp(x, maxv, V);
    losses[n] = std::log(sum) - (x[targets[n]] - maxv);
  }
}

template <class T>
void cross_entropy_forward_backward(T* dlogits, T* losses, const T* logits, const std::int32_t* targets, int N,
                                    int V, T dloss) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* x = logits + static_cast<std::size_t>(n) * V;
    T* dx = dlogits + static_cast<std::size_t>(n) * V;
    const T maxv = row_max(x, V);
    const T sum = row_sum_exp(x, maxv, V);
    const int target = targets[n];
    losses[n] = std::log(sum) - (x[target] - maxv);  // read before dx (which may alias x) is written
    const T inv = dloss / sum;
    for (int i = 0; i < V; ++i) dx[i] = exp_(x[i] - maxv) * inv;
    dx[target] -= dloss;
  }
}

template void cross_entropy_forward<float>(float*, const float*, const std::int32_t*, int, int);
template void cross_entropy_forward<double>(double*, const double*, const std::int32_t*, int, int);
template void cross_entropy_forward_backward<float>(float*, float*, const float*, const std::int32_t*, int, int,
                                                    float);
template void cross_entropy_forward_backward<double>(double*, double*, const double*, const std::int32_t*, int, int,
                                                     double);

}  // namespace meridian::kernels
