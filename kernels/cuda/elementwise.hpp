#pragma once
// Element-wise kernels and the gradient-norm reduction, the contract of kernels/cpu/elementwise.hpp,
// plus what mixed precision adds: bf16 and fp16 copies of fp32 buffers and unscaling fp16 loss-scaled
// gradients with an overflow check.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>

namespace meridian::kernels::cuda {

// out = a + b (the residual connection)
template <class T>
void add(T* out, const T* a, const T* b, std::size_t n, cudaStream_t stream);

// Sum of squares in double over a fixed grid of partial sums added in a fixed order: the result
// depends on n and the data only, not on the device or its number of SMs. Waits for the stream.
double sum_squares(const float* x, std::size_t n, cudaStream_t stream);

// x *= s
void scale(float* x, std::size_t n, float s, cudaStream_t stream);

// out = bf16(in), rounded to nearest even; and back to fp32 (exact).
void round_to_bf16(__nv_bfloat16* out, const float* in, std::size_t n, cudaStream_t stream);
void widen_to_f32(float* out, const __nv_bfloat16* in, std::size_t n, cudaStream_t stream);
// fp16 and fp32 to fp32 too (exact), so code templated on the compute type can read any of them.
void widen_to_f32(float* out, const __half* in, std::size_t n, cudaStream_t stream);
void widen_to_f32(float* out, const float* in, std::size_t n, cudaStream_t stream);
// out = fp16(in), rounded to nearest even (beyond fp16's range: infinity, as the conversion does).
void round_to_f16(__half* out, const float* in, std::size_t n, cudaStream_t stream);

// g *= inv_scale; true when every value was finite before and after. A loss-scaled step whose
// gradients overflowed must be skipped (core/optim/loss_scale.hpp). Waits for the stream.
bool unscale_gradients(float* g, std::size_t n, float inv_scale, cudaStream_t stream);

}  // namespace meridian::kernels::cuda
