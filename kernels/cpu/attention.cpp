#include "kernels/cpu/attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/cpu/fast_math.hpp"

namespace meridian::kernels {

// Per (batch, head), heads copied into dense blocks so that every inner loop runs over contiguous
// memory and vectorizes. Products that accumulate into one row are unrolled by four along the
// reduction, so a row is loaded and stored a quarter as often (the loop-carried store/load is the
// bottleneck otherwise). Work above the causal diagonal is skipped. BLAS is not used here: at T=64
// each product is a few microseconds, and OpenBLAS called from inside an OpenMP region (to run
// heads in parallel) contends on its internal buffers and runs 3-5x slower than these loops.
namespace {

// y[0..n) += a0 x0 + a1 x1 + a2 x2 + a3 x3 for the rows x_j = x + j*stride.
template <class T>
inline void axpy_rows(T* __restrict y, const T* __restrict x, std::size_t stride, const T* a, int rows, int n) {
  int j = 0;
  for (; j + 4 <= rows; j += 4) {
    const T a0 = a[j], a1 = a[j + 1], a2 = a[j + 2], a3 = a[j + 3];
    const T *x0 = x + j * stride, *x1 = x0 + stride, *x2 = x1 + stride, *x3 = x2 + stride;
    for (int i = 0; i < n; ++i) y[i] += a0 * x0[i] + a1 * x1[i] + a2 * x2[i] + a3 * x3[i];
  }
  for (; j < rows; ++j) {
    const T aj = a[j];
    const T* xj = x + j * stride;
    for (int i = 0; i < n; ++i) y[i] += aj * xj[i];
  }
}

// Copies head h of part (0 = q, 1 = k, 2 = v) of sequence b into dense (T,hs), or (hs,T) when transposed.
template <class T>
void gather_head(T* dst, const T* qkv, int b, int h, int part, int Tn, int C, int hs, bool transpose) {
  const T* base = qkv + static_cast<std::size_t>(b) * Tn * 3 * C + part * C + h * hs;
  for (int t = 0; t < Tn; ++t) {
    const T* src = base + static_cast<std::size_t>(t) * 3 * C;
    for (int d = 0; d < hs; ++d) {
      if (transpose) dst[static_cast<std::size_t>(d) * Tn + t] = src[d];
      else dst[static_cast<std::size_t>(t) * hs + d] = src[d];
    }
  }
}

}  // namespace

template <class T>
void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int C, int NH) {
  const int hs = C / NH;
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
#pragma omp parallel
  {
    std::vector<T> q(static_cast<std::size_t>(Tn) * hs), kt(q.size()), v(q.size());
#pragma omp for schedule(static)
    for (int bh = 0; bh < B * NH; ++bh) {
      const int b = bh / NH, h = bh % NH;
      gather_head(q.data(), qkv, b, h, 0, Tn, C, hs, false);
      gather_head(kt.data(), qkv, b, h, 1, Tn, C, hs, true);
      gather_head(v.data(), qkv, b, h, 2, Tn, C, hs, false);
      T* att_bh = att + static_cast<std::size_t>(bh) * Tn * Tn;
      for (int t = 0; t < Tn; ++t) {
        const int n = t + 1;  // causal: keys 0..t
        T* row = att_bh + static_cast<std::size_t>(t) * Tn;
        std::fill(row, row + Tn, T(0));
        axpy_rows(row, kt.data(), Tn, q.data() + static_cast<std::size_t>(t) * hs, hs, n);
        T maxv = row[0];
        for (int t2 = 1; t2 < n; ++t2) maxv = std::max(maxv, row[t2]);
        maxv *= scale;
        T sum = 0;
        for (int t2 = 0; t2 < n; ++t2) {
          row[t2] = exp_(row[t2] * scale - maxv);
          sum += row[t2];
        }
        const T inv = T(1) / sum;
        for (int t2 = 0; t2 < n; ++t2) row[t2] *= inv;
        T* o = out + (static_cast<std::size_t>(b) * Tn + t) * C + h * hs;
        std::fill(o, o + hs, T(0));
        axpy_rows(o, v.data(), hs, row, n, hs);
      }
    }
  }
}

template <class T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* att, int B, int Tn, int C, int NH) {
  const int hs = C / NH;
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
#pragma omp parallel
  {
    const std::size_t block = static_cast<std::size_t>(Tn) * hs;
    std::vector<T> q(block), k(block), vt(block), dk(block), dv(block), ds(Tn), dq_row(hs);
#pragma omp for schedule(static)
    for (int bh = 0; bh < B * NH; ++bh) {
      const int b = bh / NH, h = bh % NH;
      gather_head(q.data(), qkv, b, h, 0, Tn, C, hs, false);
      gather_head(k.data(), qkv, b, h, 1, Tn, C, hs, false);
      gather_head(vt.data(), qkv, b, h, 2, Tn, C, hs, true);
      std::fill(dk.begin(), dk.end(), T(0));
      std::fill(dv.begin(), dv.end(), T(0));
      const T* att_bh = att + static_cast<std::size_t>(bh) * Tn * Tn;
      T* dq_base = dqkv + static_cast<std::size_t>(b) * Tn * 3 * C + h * hs;
      for (int t = 0; t < Tn; ++t) {
        const int n = t + 1;
        const T* p = att_bh + static_cast<std::size_t>(t) * Tn;
        const T* g = dout + (static_cast<std::size_t>(b) * Tn + t) * C + h * hs;
        // dP[t2] = dO . v[t2];  dv[t2] += P[t2] dO
        std::fill(ds.begin(), ds.begin() + n, T(0));
        axpy_rows(ds.data(), vt.data(), Tn, g, hs, n);
        for (int t2 = 0; t2 < n; ++t2) {
          const T w = p[t2];
          T* dvr = dv.data() + static_cast<std::size_t>(t2) * hs;
          for (int d = 0; d < hs; ++d) dvr[d] += w * g[d];
        }
        // softmax backward, folded with the 1/sqrt(hs) scale of the scores
        T inner = 0;
        for (int t2 = 0; t2 < n; ++t2) inner += p[t2] * ds[t2];
        for (int t2 = 0; t2 < n; ++t2) ds[t2] = p[t2] * (ds[t2] - inner) * scale;
        // dq[t] = sum_t2 dS[t2] k[t2];  dk[t2] += dS[t2] q[t]
        std::fill(dq_row.begin(), dq_row.end(), T(0));
        axpy_rows(dq_row.data(), k.data(), hs, ds.data(), n, hs);
        const T* qt = q.data() + static_cast<std::size_t>(t) * hs;
        for (int t2 = 0; t2 < n; ++t2) {
          const T w = ds[t2];
          T* dkr = dk.data() + static_cast<std::size_t>(t2) * hs;
          for (int d = 0; d < hs; ++d) dkr[d] += w * qt[d];
        }
        std::copy(dq_row.begin(), dq_row.end(), dq_base + static_cast<std::size_t>(t) * 3 * C);
      }
      for (int t = 0; t < Tn; ++t) {
        T* r = dq_base + static_cast<std::size_t>(t) * 3 * C;
        std::copy_n(dk.data() + static_cast<std::size_t>(t) * hs, hs, r + C);
        std::copy_n(dv.data() + static_cast<std::size_t>(t) * hs, hs, r + 2 * C);
      }
    }
  }
}

template void attention_forward<float>(float*, float*, const float*, int, int, int, int);
template void attention_forward<double>(double*, double*, const double*, int, int, int, int);
template void attention_backward<float>(float*, const float*, const float*, const float*, int, int, int, int);
template void attention_backward<double>(double*, const double*, const double*, const double*, int, int, int, int);

}  // namespace meridian::kernels
