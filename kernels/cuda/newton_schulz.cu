#include "kernels/cuda/newton_schulz.hpp"

#include "kernels/cuda/cuda_check.hpp"

namespace meridian::kernels::cuda {

// Row-major r x c is column-major c x r: cublasSgeam's transpose of that is the row-major c x r
// transpose. Everything else is a product, an axpy or a scale, as on the CPU.
void newton_schulz(Blas& blas, const float* g, float* out, int rows, int cols, int steps, float* work) {
  const long long n = static_cast<long long>(rows) * cols;
  const bool transposed = rows > cols;
  const int m = transposed ? cols : rows, k = transposed ? rows : cols;
  float* a = work;
  float* b = work + static_cast<long long>(m) * m;
  float* x = b + static_cast<long long>(m) * m;
  cublasHandle_t h = blas.handle();
  float norm = 0;
  MERIDIAN_CUBLAS(cublasSnrm2(h, static_cast<int>(n), g, 1, &norm));  // host pointer mode: waits for it
  const float scale = static_cast<float>(1.0 / (static_cast<double>(norm) + 1e-7));
  const float zero = 0.0f;
  if (transposed)  // x (cols x rows, row-major) = g^T * scale
    MERIDIAN_CUBLAS(cublasSgeam(h, CUBLAS_OP_T, CUBLAS_OP_N, rows, cols, &scale, g, cols, &zero, x, rows, x, rows));
  else
    MERIDIAN_CUBLAS(cublasSgeam(h, CUBLAS_OP_N, CUBLAS_OP_N, cols, rows, &scale, g, cols, &zero, x, cols, x, cols));
  constexpr float ca = 3.4445f, cb = -4.7750f, cc = 2.0315f;
  for (int s = 0; s < steps; ++s) {
    gemm<float, float>(blas, false, true, m, m, k, 1.0f, x, k, x, k, 0.0f, a, m);
    gemm<float, float>(blas, false, false, m, m, m, cc, a, m, a, m, 0.0f, b, m);
    MERIDIAN_CUBLAS(cublasSaxpy(h, m * m, &cb, a, 1, b, 1));
    MERIDIAN_CUDA(cudaMemcpyAsync(out, x, sizeof(float) * n, cudaMemcpyDeviceToDevice, blas.stream()));
    gemm<float, float>(blas, false, false, m, k, m, 1.0f, b, m, out, k, ca, x, k);
  }
  const float one = 1.0f;
  if (transposed)  // out (rows x cols) = x^T
    MERIDIAN_CUBLAS(cublasSgeam(h, CUBLAS_OP_T, CUBLAS_OP_N, cols, rows, &one, x, rows, &zero, out, cols, out, cols));
  else
    MERIDIAN_CUDA(cudaMemcpyAsync(out, x, sizeof(float) * n, cudaMemcpyDeviceToDevice, blas.stream()));
}

}  // namespace meridian::kernels::cuda
