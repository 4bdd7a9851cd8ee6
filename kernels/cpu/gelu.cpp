#include "kernels/cpu/gelu.hpp"

#include "kernels/cpu/fast_math.hpp"

namespace meridian::kernels {
namespace {
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kCubic = 0.044715;
}  // namespace

template <class T>
void gelu_forward(T* out, const T* inp, std::size_t n) {
  const T a = static_cast<T>(kSqrt2OverPi), c = static_cast<T>(kCubic);
#pragma omp parallel for simd schedule(static)
  for (std::size_t i = 0; i < n; ++i) {
    const T x = inp[i];
    out[i] = T(0.5) * x * (T(1) + tanh_(a * (x + c * x * x * x)));
  }
}

template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, std::size_t n) {
  const T a = static_cast<T>(kSqrt2OverPi), c = static_cast<T>(kCubic);
#pragma omp parallel for simd schedule(static)
  for (std::size_t i = 0; i < n; ++i) {
    const T x = inp[i];
    const T th = tanh_(a * (x + c * x * x * x));
    const T sech2 = T(1) - th * th;
    const T grad = T(0.5) * (T(1) + th) + T(0.5) * x * sech2 * a * (T(1) + T(3) * c * x * x);
    dinp[i] = grad * dout[i];
  }
}

template void gelu_forward<float>(float*, const float*, std::size_t);
template void gelu_forward<double>(double*, const double*, std::size_t);
template void gelu_backward<float>(float*, const float*, const float*, std::size_t);
template void gelu_backward<double>(double*, const double*, const double*, std::size_t);

}  // namespace meridian::kernels
