#pragma once

namespace meridian::kernels {

// out = inp @ w + bias.   inp: (N,IN), w: (IN,OUT) (GPT-2 Conv1D layout), bias: (OUT) or null, out: (N,OUT)
template <class T>
void matmul_forward(T* out, const T* inp, const T* w, const T* bias, int N, int IN, int OUT);

// dinp = dout @ w^T (overwritten; skipped when dinp is null), dw += inp^T @ dout, dbias += colsum(dout).
template <class T>
void matmul_backward(T* dinp, T* dw, T* dbias, const T* dout, const T* inp, const T* w, int N, int IN, int OUT);

}  // namespace meridian::kernels

namespace meridian::kernels {

// The same product with the weight stored (OUT,IN), as PyTorch's Linear does: Llama's projections,
// and GPT-2's tied output head, which reads the (vocab, C) token embedding.
//   out = inp @ w^T + bias (bias: (OUT) or null)
template <class T>
void matmul_nt_forward(T* out, const T* inp, const T* w, const T* bias, int N, int IN, int OUT);

// dinp = dout @ w (overwritten; skipped when null), dw += dout^T @ inp, dbias += colsum(dout) (when not null).
template <class T>
void matmul_nt_backward(T* dinp, T* dw, T* dbias, const T* dout, const T* inp, const T* w, int N, int IN, int OUT);

}  // namespace meridian::kernels
