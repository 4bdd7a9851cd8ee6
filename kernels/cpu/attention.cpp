#include "kernels/cpu/attention.hpp"

#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/cpu/fast_math.hpp"
#include "kernels/cpu/gemm.hpp"

namespace meridian::kernels {

// Each (batch, head) is a few small GEMMs that read q, k and v in place (leading dimension
// (NH+2KV)hs) plus a masked softmax on its (T,T) block; heads run in parallel, and OpenBLAS runs
// each GEMM on the calling thread inside the OpenMP region. The products are computed over the
// full square and the upper triangle masked: at T=64 a BLAS kernel on the square was 1.5-2x
// faster than vectorized loops restricted to the triangle (bench: 176 vs 261 us forward, 224 vs
// 404 us backward for B=8, 4 heads, C=128), and it degrades less when the other core is busy.

namespace {

struct Heads {
  int NH, KV, hs;
  int ld() const { return (NH + 2 * KV) * hs; }
  int out_ld() const { return NH * hs; }
  std::size_t q(int b, int Tn, int h) const { return static_cast<std::size_t>(b) * Tn * ld() + h * hs; }
  std::size_t k(int b, int Tn, int h) const { return q(b, Tn, NH) + (h / (NH / KV)) * hs; }
  std::size_t v(int b, int Tn, int h) const { return k(b, Tn, h) + KV * hs; }
};

}  // namespace

template <class T>
void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int NH, int KV, int hs) {
  const Heads H{NH, KV, hs};
  const int ld = H.ld();
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < B * NH; ++bh) {
    const int b = bh / NH, h = bh % NH;
    const T* q = qkv + H.q(b, Tn, h);
    const T* k = qkv + H.k(b, Tn, h);
    const T* v = qkv + H.v(b, Tn, h);
    T* a = att + static_cast<std::size_t>(bh) * Tn * Tn;
    gemm<T>(false, true, Tn, Tn, hs, scale, q, ld, k, ld, T(0), a, Tn);
    for (int t = 0; t < Tn; ++t) {
      T* row = a + static_cast<std::size_t>(t) * Tn;
      const int n = t + 1;  // causal: keys 0..t
      T maxv = row[0];
      for (int t2 = 1; t2 < n; ++t2) maxv = row[t2] > maxv ? row[t2] : maxv;
      T sum = 0;
      for (int t2 = 0; t2 < n; ++t2) {
        row[t2] = exp_(row[t2] - maxv);
        sum += row[t2];
      }
      const T inv = T(1) / sum;
      for (int t2 = 0; t2 < n; ++t2) row[t2] *= inv;
      for (int t2 = n; t2 < Tn; ++t2) row[t2] = 0;
    }
    gemm<T>(false, false, Tn, hs, Tn, T(1), a, Tn, v, ld, T(0),
            out + static_cast<std::size_t>(b) * Tn * H.out_ld() + h * hs, H.out_ld());
  }
}

template <class T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* att, int B, int Tn, int NH, int KV, int hs) {
  const Heads H{NH, KV, hs};
  const int ld = H.ld(), group = NH / KV;
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
#pragma omp parallel
  {
    std::vector<T> ds(static_cast<std::size_t>(Tn) * Tn);
#pragma omp for schedule(static)
    for (int bkv = 0; bkv < B * KV; ++bkv) {
      const int b = bkv / KV;
      for (int g = 0; g < group; ++g) {
        const int h = (bkv % KV) * group + g;
        const T beta = g == 0 ? T(0) : T(1);  // the group's first head writes dk and dv, the others add
        const T *q = qkv + H.q(b, Tn, h), *k = qkv + H.k(b, Tn, h), *v = qkv + H.v(b, Tn, h);
        T *dq = dqkv + H.q(b, Tn, h), *dk = dqkv + H.k(b, Tn, h), *dv = dqkv + H.v(b, Tn, h);
        const T* a = att + (static_cast<std::size_t>(b) * NH + h) * Tn * Tn;
        const T* dO = dout + static_cast<std::size_t>(b) * Tn * H.out_ld() + h * hs;
        gemm<T>(true, false, Tn, hs, Tn, T(1), a, Tn, dO, H.out_ld(), beta, dv, ld);         // dv += P^T dO
        gemm<T>(false, true, Tn, Tn, hs, T(1), dO, H.out_ld(), v, ld, T(0), ds.data(), Tn);  // dP = dO v^T
        // softmax backward, folded with the 1/sqrt(hs) of the scores; masked entries have P = 0
        for (int t = 0; t < Tn; ++t) {
          const T* p = a + static_cast<std::size_t>(t) * Tn;
          T* d = ds.data() + static_cast<std::size_t>(t) * Tn;
          const int n = t + 1;
          T inner = 0;
          for (int t2 = 0; t2 < n; ++t2) inner += p[t2] * d[t2];
          for (int t2 = 0; t2 < n; ++t2) d[t2] = p[t2] * (d[t2] - inner) * scale;
          for (int t2 = n; t2 < Tn; ++t2) d[t2] = 0;
        }
        gemm<T>(false, false, Tn, hs, Tn, T(1), ds.data(), Tn, k, ld, T(0), dq, ld);  // dq = dS k
        gemm<T>(true, false, Tn, hs, Tn, T(1), ds.data(), Tn, q, ld, beta, dk, ld);   // dk += dS^T q
      }
    }
  }
}

template void attention_forward<float>(float*, float*, const float*, int, int, int, int, int);
template void attention_forward<double>(double*, double*, const double*, int, int, int, int, int);
template void attention_backward<float>(float*, const float*, const float*, const float*, int, int, int, int, int);
template void attention_backward<double>(double*, const double*, const double*, const double*, int, int, int, int,
                                         int);

}  // namespace meridian::kernels
