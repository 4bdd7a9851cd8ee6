#include "kernels/cpu/swiglu.hpp"

#include "kernels/cpu/fast_math.hpp"

namespace meridian::kernels {

template <class T>
void swiglu_forward(T* out, const T* gate_up, int N, int F) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* g = gate_up + static_cast<std::size_t>(n) * 2 * F;
    const T* u = g + F;
    T* o = out + static_cast<std::size_t>(n) * F;
    for (int j = 0; j < F; ++j) o[j] = g[j] / (T(1) + exp_(-g[j])) * u[j];
  }
}

template <class T>
void swiglu_backward(T* dgate_up, const T* gate_up, const T* dout, int N, int F) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* g = gate_up + static_cast<std::size_t>(n) * 2 * F;
    const T* u = g + F;
    const T* d = dout + static_cast<std::size_t>(n) * F;
    T* dg = dgate_up + static_cast<std::size_t>(n) * 2 * F;
    T* du = dg + F;
    for (int j = 0; j < F; ++j) {
      const T sig = T(1) / (T(1) + exp_(-g[j]));
      const T silu = g[j] * sig;
      dg[j] = d[j] * u[j] * sig * (T(1) + g[j] * (T(1) - sig));
      du[j] = d[j] * silu;
    }
  }
}

template void swiglu_forward<float>(float*, const float*, int, int);
template void swiglu_forward<double>(double*, const double*, int, int);
template void swiglu_backward<float>(float*, const float*, const float*, int, int);
template void swiglu_backward<double>(double*, const double*, const double*, int, int);

}  // namespace meridian::kernels
