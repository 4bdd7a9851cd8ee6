#pragma once

namespace meridian::kernels {

// RMSNorm over the last dim, row by row, as Llama's (Hugging Face's LlamaRMSNorm):
//   out = w * x / sqrt(mean(x^2) + eps).     inp/out: (N,C); rstd: (N), kept for backward
template <class T>
void rmsnorm_forward(T* out, T* rstd, const T* inp, const T* w, int N, int C, double eps);

// dinp += ..., dw += ...   (both accumulate: dinp is the residual stream's gradient)
template <class T>
void rmsnorm_backward(T* dinp, T* dw, const T* dout, const T* inp, const T* w, const T* rstd, int N, int C);

}  // namespace meridian::kernels
