#pragma once
// Linear layers on the device, the contract of kernels/cpu/matmul.hpp: the same shapes, layouts
// (GPT-2 Conv1D [in, out] weights; the tied head reads the [vocab, C] embedding) and
// overwrite/accumulate rules. Activations and weights are T (float, or bf16 copies under mixed
// precision); weight and bias gradients are always fp32, accumulated in fp32 by cuBLAS.
#include "kernels/cuda/gemm.hpp"

namespace meridian::kernels::cuda {

// out = inp @ w + bias (bias may be null).
template <class T>
void matmul_forward(Blas& blas, T* out, const T* inp, const T* w, const T* bias, int N, int IN, int OUT);

// dinp = dout @ w^T (overwritten; skipped when null), dw += inp^T @ dout, dbias += colsum(dout).
template <class T>
void matmul_backward(Blas& blas, T* dinp, float* dw, float* dbias, const T* dout, const T* inp, const T* w, int N,
                     int IN, int OUT);

// out = inp @ w^T + bias with w stored (OUT, IN) (Llama's projections, the tied head); bias may be null.
// `ld_out`: the stride of out's rows (0: OUT), larger for the output layer's aligned rows.
template <class T>
void matmul_nt_forward(Blas& blas, T* out, const T* inp, const T* w, const T* bias, int N, int IN, int OUT,
                       int ld_out = 0);

// dinp = dout @ w (overwritten; skipped when null), dw += dout^T @ inp, dbias += colsum(dout) (when not
// null; only for dout of stride OUT).
template <class T>
void matmul_nt_backward(Blas& blas, T* dinp, float* dw, float* dbias, const T* dout, const T* inp, const T* w, int N,
                        int IN, int OUT, int ld_out = 0);

}  // namespace meridian::kernels::cuda
