#pragma once
// Device-side helpers shared by the kernels: fp32 loads and stores of either storage type, warp
// and block reductions. Included by .cu files only.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>

namespace meridian::kernels::cuda {

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }

template <class T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }

struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
  static constexpr float identity = 0.0f;
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
  static constexpr float identity = -3.402823466e38f;
};

template <class Op>
__device__ __forceinline__ float warp_reduce(float v, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Reduction over the whole block (blockDim.x a multiple of 32), result in every thread. The
// leading barrier lets a block call it twice in a row without the second call overwriting
// partials the first is still reading.
template <class Op>
__device__ float block_reduce(float v, Op op) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_reduce(v, op);
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < warps ? partial[lane] : Op::identity;
  return warp_reduce(v, op);
}

inline unsigned grid_for(std::size_t n, unsigned threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace meridian::kernels::cuda
