#pragma once
// The device twin of kernels/cpu/newton_schulz.hpp (Muon's orthogonalization), on the Blas's
// stream, in fp32 through cuBLAS: the same iteration, coefficients and transposition rule, so the
// two agree to fp32 rounding (tests/kernels/test_cuda_kernels.cpp).
#include "kernels/cuda/gemm.hpp"

namespace meridian::kernels::cuda {

// g, out: rows x cols, row-major, on the device (out may not alias g); work: the device buffer of
// kernels::newton_schulz_work(rows, cols) floats.
void newton_schulz(Blas& blas, const float* g, float* out, int rows, int cols, int steps, float* work);

}  // namespace meridian::kernels::cuda
