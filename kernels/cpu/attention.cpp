#include "kernels/cpu/attention.hpp"

#include <cmath>
#include <cstddef>
#include <algorithm>
#include <vector>

#include "kernels/cpu/fast_math.hpp"

namespace meridian::kernels {
namespace {

// Copies head h of q, k or v (selected by `part` = 0, 1, 2) of batch row b into a dense (T,hs)
// block, or its transpose (hs,T) when `transpose`, so that inner loops run over contiguous memory.
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
    std::vector<T> q(static_cast<std::size_t>(Tn) * hs), kt(q.size()), v(q.size()), row(Tn);
#pragma omp for schedule(static)
    for (int bh = 0; bh < B * NH; ++bh) {
      const int b = bh / NH, h = bh % NH;
      gather_head(q.data(), qkv, b, h, 0, Tn, C, hs, false);
      gather_head(kt.data(), qkv, b, h, 1, Tn, C, hs, true);
      gather_head(v.data(), qkv, b, h, 2, Tn, C, hs, false);
      T* att_bh = att + static_cast<std::size_t>(bh) * Tn * Tn;
      for (int t = 0; t < Tn; ++t) {
        const int n = t + 1;  // causal: keys 0..t
        const T* qt = q.data() + static_cast<std::size_t>(t) * hs;
        for (int t2 = 0; t2 < n; ++t2) row[t2] = 0;
        for (int d = 0; d < hs; ++d) {
          const T qd = qt[d] * scale;
          const T* k_d = kt.data() + static_cast<std::size_t>(d) * Tn;
          for (int t2 = 0; t2 < n; ++t2) row[t2] += qd * k_d[t2];
        }
        T maxv = row[0];
        for (int t2 = 1; t2 < n; ++t2) maxv = row[t2] > maxv ? row[t2] : maxv;
        T sum = 0;
        for (int t2 = 0; t2 < n; ++t2) {
          row[t2] = exp_(row[t2] - maxv);
          sum += row[t2];
        }
        const T inv = T(1) / sum;
        T* a = att_bh + static_cast<std::size_t>(t) * Tn;
        for (int t2 = 0; t2 < n; ++t2) a[t2] = row[t2] * inv;
        for (int t2 = n; t2 < Tn; ++t2) a[t2] = 0;
        T* o = out + (static_cast<std::size_t>(b) * Tn + t) * C + h * hs;
        for (int d = 0; d < hs; ++d) o[d] = 0;
        for (int t2 = 0; t2 < n; ++t2) {
          const T w = a[t2];
          const T* vt2 = v.data() + static_cast<std::size_t>(t2) * hs;
          for (int d = 0; d < hs; ++d) o[d] += w * vt2[d];
        }
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
    std::vector<T> q(block), k(block), vt(block), dq(block), dk(block), dv(block), datt(Tn);
#pragma omp for schedule(static)
    for (int bh = 0; bh < B * NH; ++bh) {
      const int b = bh / NH, h = bh % NH;
      gather_head(q.data(), qkv, b, h, 0, Tn, C, hs, false);
      gather_head(k.data(), qkv, b, h, 1, Tn, C, hs, false);
      gather_head(vt.data(), qkv, b, h, 2, Tn, C, hs, true);
      std::fill(dq.begin(), dq.end(), T(0));
      std::fill(dk.begin(), dk.end(), T(0));
      std::fill(dv.begin(), dv.end(), T(0));
      const T* att_bh = att + static_cast<std::size_t>(bh) * Tn * Tn;
      for (int t = 0; t < Tn; ++t) {
        const int n = t + 1;
        const T* a = att_bh + static_cast<std::size_t>(t) * Tn;
        const T* dot = dout + (static_cast<std::size_t>(b) * Tn + t) * C + h * hs;
        // d(att) = dout . v, and dv += att * dout
        for (int t2 = 0; t2 < n; ++t2) datt[t2] = 0;
        for (int d = 0; d < hs; ++d) {
          const T g = dot[d];
          const T* v_d = vt.data() + static_cast<std::size_t>(d) * Tn;
          for (int t2 = 0; t2 < n; ++t2) datt[t2] += g * v_d[t2];
        }
        for (int t2 = 0; t2 < n; ++t2) {
          const T w = a[t2];
          T* dvt2 = dv.data() + static_cast<std::size_t>(t2) * hs;
          for (int d = 0; d < hs; ++d) dvt2[d] += w * dot[d];
        }
        // softmax backward, folded with the 1/sqrt(hs) scale of the scores
        T inner = 0;
        for (int t2 = 0; t2 < n; ++t2) inner += a[t2] * datt[t2];
        for (int t2 = 0; t2 < n; ++t2) datt[t2] = a[t2] * (datt[t2] - inner) * scale;
        const T* qt = q.data() + static_cast<std::size_t>(t) * hs;
        T* dqt = dq.data() + static_cast<std::size_t>(t) * hs;
        for (int t2 = 0; t2 < n; ++t2) {
          const T g = datt[t2];
          const T* kt2 = k.data() + static_cast<std::size_t>(t2) * hs;
          T* dkt2 = dk.data() + static_cast<std::size_t>(t2) * hs;
          for (int d = 0; d < hs; ++d) {
            dqt[d] += g * kt2[d];
            dkt2[d] += g * qt[d];
          }
        }
      }
      T* base = dqkv + static_cast<std::size_t>(b) * Tn * 3 * C + h * hs;
      for (int t = 0; t < Tn; ++t) {
        T* r = base + static_cast<std::size_t>(t) * 3 * C;
        for (int d = 0; d < hs; ++d) {
          r[d] = dq[static_cast<std::size_t>(t) * hs + d];
          r[C + d] = dk[static_cast<std::size_t>(t) * hs + d];
          r[2 * C + d] = dv[static_cast<std::size_t>(t) * hs + d];
        }
      }
    }
  }
}

template void attention_forward<float>(float*, float*, const float*, int, int, int, int);
template void attention_forward<double>(double*, double*, const double*, int, int, int, int);
template void attention_backward<float>(float*, const float*, const float*, const float*, int, int, int, int);
template void attention_backward<double>(double*, const double*, const double*, const double*, int, int, int, int);

}  // namespace meridian::kernels
