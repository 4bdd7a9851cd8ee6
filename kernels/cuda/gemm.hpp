#pragma once
// Row-major matrix products on the device through cuBLAS, with the signature of the CPU twin
// (kernels/cpu/gemm.hpp): C = alpha * op(A) * op(B) + beta * C, op(A) M x K, op(B) K x N.
// A and B are Tin (float: the fp32 reference path; __nv_bfloat16: mixed precision), C is Tout;
// accumulation is fp32 in every case (CUBLAS_COMPUTE_32F, no TF32).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace meridian::kernels::cuda {

// A cuBLAS handle bound to one stream; every product issued through it runs on that stream.
class Blas {
 public:
  explicit Blas(cudaStream_t stream = nullptr);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;
  cublasHandle_t handle() const { return handle_; }
  cudaStream_t stream() const { return stream_; }

  // cuBLASLt's handle, workspace and the algorithm found for each shape (gemm_bias), made on first use.
  struct Lt;
  Lt& lt();
  bool bias_epilogue = true;    // false: gemm_bias declines (bench_gpu measures what the epilogue buys)
  std::size_t lt_products = 0;  // products gemm_bias ran through cuBLASLt (tests: which path ran)
  std::vector<std::string> lt_refusals;  // statuses of algorithms cuBLASLt offered, then refused to run

 private:
  cublasHandle_t handle_ = nullptr;
  cudaStream_t stream_;
  std::unique_ptr<Lt> lt_;
};

template <class Tin, class Tout>
void gemm(Blas& blas, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const Tin* A, int lda,
          const Tin* B, int ldb, float beta, Tout* C, int ldc);

// C = op(A) * op(B) + bias, the bias (one Tout per column of C) added to the fp32 accumulator in
// cuBLASLt's epilogue, so C is written once and never read. False, C untouched, where cuBLASLt
// offers no algorithm for the shape (odd sizes or alignments): the caller takes the plain path.
template <class Tin, class Tout>
bool gemm_bias(Blas& blas, bool trans_a, bool trans_b, int M, int N, int K, const Tin* A, int lda, const Tin* B,
               int ldb, const Tout* bias, Tout* C, int ldc);

// `batch` independent products; matrix i of A starts at A + i * stride_a (likewise B, C).
template <class Tin, class Tout>
void gemm_batched(Blas& blas, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const Tin* A, int lda,
                  long long stride_a, const Tin* B, int ldb, long long stride_b, float beta, Tout* C, int ldc,
                  long long stride_c, int batch);

}  // namespace meridian::kernels::cuda
