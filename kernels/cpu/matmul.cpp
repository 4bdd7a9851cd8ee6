#include "kernels/cpu/matmul.hpp"

#include <cstddef>

#include "kernels/cpu/gemm.hpp"

namespace meridian::kernels {

namespace {

// Seeds the output with the bias so that the GEMM adds onto it (beta = 1): one pass fewer.
template <class T>
T seed_with_bias(T* out, const T* bias, int N, int OUT) {
  if (bias == nullptr) return T(0);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    T* o = out + static_cast<std::size_t>(n) * OUT;
    for (int j = 0; j < OUT; ++j) o[j] = bias[j];
  }
  return T(1);
}

template <class T>
void add_column_sums(T* dbias, const T* dout, int N, int OUT) {
  if (dbias == nullptr) return;
#pragma omp parallel for schedule(static)
  for (int j0 = 0; j0 < OUT; j0 += 32) {
    const int j1 = j0 + 32 < OUT ? j0 + 32 : OUT;
    for (int n = 0; n < N; ++n) {
      const T* d = dout + static_cast<std::size_t>(n) * OUT;
      for (int j = j0; j < j1; ++j) dbias[j] += d[j];
    }
  }
}

}  // namespace

template <class T>
void matmul_forward(T* out, const T* inp, const T* w, const T* bias, int N, int IN, int OUT) {
  const T beta = seed_with_bias(out, bias, N, OUT);
  gemm<T>(false, false, N, OUT, IN, T(1), inp, IN, w, OUT, beta, out, OUT);
}

template <class T>
void matmul_backward(T* dinp, T* dw, T* dbias, const T* dout, const T* inp, const T* w, int N, int IN, int OUT) {
  if (dinp != nullptr) gemm<T>(false, true, N, IN, OUT, T(1), dout, OUT, w, OUT, T(0), dinp, IN);
  gemm<T>(true, false, IN, OUT, N, T(1), inp, IN, dout, OUT, T(1), dw, OUT);
  add_column_sums(dbias, dout, N, OUT);
}

template <class T>
void matmul_nt_forward(T* out, const T* inp, const T* w, const T* bias, int N, int IN, int OUT) {
  const T beta = seed_with_bias(out, bias, N, OUT);
  gemm<T>(false, true, N, OUT, IN, T(1), inp, IN, w, IN, beta, out, OUT);
}

template <class T>
void matmul_nt_backward(T* dinp, T* dw, T* dbias, const T* dout, const T* inp, const T* w, int N, int IN, int OUT) {
  if (dinp != nullptr) gemm<T>(false, false, N, IN, OUT, T(1), dout, OUT, w, IN, T(0), dinp, IN);
  gemm<T>(true, false, OUT, IN, N, T(1), dout, OUT, inp, IN, T(1), dw, IN);
  add_column_sums(dbias, dout, N, OUT);
}

template void matmul_forward<float>(float*, const float*, const float*, const float*, int, int, int);
template void matmul_forward<double>(double*, const double*, const double*, const double*, int, int, int);
template void matmul_backward<float>(float*, float*, float*, const float*, const float*, const float*, int, int,
                                     int);
template void matmul_backward<double>(double*, double*, double*, const double*, const double*, const double*, int,
                                      int, int);

template void matmul_nt_forward<float>(float*, const float*, const float*, const float*, int, int, int);
template void matmul_nt_forward<double>(double*, const double*, const double*, const double*, int, int, int);
template void matmul_nt_backward<float>(float*, float*, float*, const float*, const float*, const float*, int, int,
                                        int);
template void matmul_nt_backward<double>(double*, double*, double*, const double*, const double*, const double*, int,
                                         int, int);

}  // namespace meridian::kernels
