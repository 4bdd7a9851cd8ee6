#pragma once

namespace meridian::kernels {

inline constexpr double kLayerNormEps = 1e-5;

// out = (inp - mean) * rstd * w + b over the last dim, row by row.   inp/out: (N,C); mean/rstd: (N)
template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* w, const T* b, int N, int C);

// dinp += ..., dw += ..., db += ...   (all three accumulate: dinp is the residual stream's gradient)
template <class T>
void layernorm_backward(T* dinp, T* dw, T* db, const T* dout, const T* inp, const T* w, const T* mean,
                        const T* rstd, int N, int C);

}  // namespace meridian::kernels
