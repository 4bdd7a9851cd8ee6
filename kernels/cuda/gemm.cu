#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/gemm.hpp"

namespace meridian::kernels::cuda {
namespace {

template <class T>
constexpr cudaDataType_t data_type();
template <>
constexpr cudaDataType_t data_type<float>() { return CUDA_R_32F; }
template <>
constexpr cudaDataType_t data_type<__nv_bfloat16>() { return CUDA_R_16BF; }
template <>
constexpr cudaDataType_t data_type<__half>() { return CUDA_R_16F; }

cublasOperation_t op(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

}  // namespace

// cuBLAS is column-major: a row-major C is a column-major C^T, and C^T = op(B)^T op(A)^T, so the
// operands swap places and M and N trade roles; the leading dimensions stay as they are.
template <class Tin, class Tout>
void gemm(Blas& blas, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const Tin* A, int lda,
          const Tin* B, int ldb, float beta, Tout* C, int ldc) {
  MERIDIAN_CUBLAS(cublasGemmEx(blas.handle(), op(trans_b), op(trans_a), N, M, K, &alpha, B, data_type<Tin>(), ldb, A,
                               data_type<Tin>(), lda, &beta, C, data_type<Tout>(), ldc, CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT));
}

template <class Tin, class Tout>
void gemm_batched(Blas& blas, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const Tin* A, int lda,
                  long long stride_a, const Tin* B, int ldb, long long stride_b, float beta, Tout* C, int ldc,
                  long long stride_c, int batch) {
  MERIDIAN_CUBLAS(cublasGemmStridedBatchedEx(blas.handle(), op(trans_b), op(trans_a), N, M, K, &alpha, B,
                                             data_type<Tin>(), ldb, stride_b, A, data_type<Tin>(), lda, stride_a,
                                             &beta, C, data_type<Tout>(), ldc, stride_c, batch, CUBLAS_COMPUTE_32F,
                                             CUBLAS_GEMM_DEFAULT));
}

#define MERIDIAN_GEMM(Tin, Tout)                                                                              \
  template void gemm<Tin, Tout>(Blas&, bool, bool, int, int, int, float, const Tin*, int, const Tin*, int, float, \
                                Tout*, int);                                                                  \
  template void gemm_batched<Tin, Tout>(Blas&, bool, bool, int, int, int, float, const Tin*, int, long long,     \
                                        const Tin*, int, long long, float, Tout*, int, long long, int);
MERIDIAN_GEMM(float, float)
MERIDIAN_GEMM(__nv_bfloat16, __nv_bfloat16)
MERIDIAN_GEMM(__nv_bfloat16, float)
MERIDIAN_GEMM(__half, __half)
MERIDIAN_GEMM(__half, float)
#undef MERIDIAN_GEMM

}  // namespace meridian::kernels::cuda
