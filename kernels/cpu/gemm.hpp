#pragma once
// Row-major C = alpha * op(A) * op(B) + beta * C through CBLAS (sgemm for float, dgemm for double).
// op(A) is M x K, op(B) is K x N, C is M x N.
namespace meridian::kernels {

template <class T>
void gemm(bool trans_a, bool trans_b, int M, int N, int K, T alpha, const T* A, int lda, const T* B,
          int ldb, T beta, T* C, int ldc);

}  // namespace meridian::kernels
