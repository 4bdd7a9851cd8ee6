#include <cstdint>

#include "kernels/cuda/block_codec.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/device_math.cuh"

namespace meridian::kernels::cuda {
namespace {

constexpr unsigned kWarpsPerBlock = 8;
constexpr std::uint32_t kAbsMask = 0x7FFFFFFFu, kExpMask = 0x7F800000u;
constexpr float kFloatMin = 1.17549435e-38f;

template <int Bits>
constexpr float kQmax = Bits == 8 ? 127.0f : 7.0f;

__device__ __forceinline__ float sent(const float* x, const float* residual, std::size_t i) {
  return residual != nullptr ? __fadd_rn(x[i], residual[i]) : x[i];
}

template <int Bits>
__device__ __forceinline__ int quantize(float t, float scale) {
  float v;
  if (scale >= kFloatMin) v = __fmul_rn(t, __fdiv_rn(1.0f, scale));
  else if (scale > 0.0f) v = __fdiv_rn(t, scale);  // 1/scale would overflow
  else v = 0.0f;
  return static_cast<int>(fminf(fmaxf(rintf(v), -kQmax<Bits>), kQmax<Bits>));
}

// Pass 1, one warp per codec block: the scale, or the flag for a non-finite value anywhere.
template <int Bits>
__global__ void scales_kernel(float* scales, int* bad, const float* x, const float* residual, std::size_t n,
                              std::size_t block, std::size_t blocks) {
  const std::size_t b = blockIdx.x * static_cast<std::size_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const unsigned lane = threadIdx.x % 32;
  if (b >= blocks) return;
  const std::size_t start = b * block, end = start + block < n ? start + block : n;
  std::uint32_t worst = 0;
  for (std::size_t i = start + lane; i < end; i += 32) worst = max(worst, __float_as_uint(sent(x, residual, i)) & kAbsMask);
  for (int offset = 16; offset > 0; offset >>= 1) worst = max(worst, __shfl_xor_sync(0xffffffffu, worst, offset));
  if (lane != 0) return;
  if (worst >= kExpMask) {
    *bad = 1;
    return;
  }
  float scale = __fdiv_rn(__uint_as_float(worst), kQmax<Bits>);
  // The decoder refuses a scale whose largest step overflows; near FLT_MAX the rounded quotient can.
  if (!isfinite(__fmul_rn(scale, kQmax<Bits>))) scale = nextafterf(scale, 0.0f);
  scales[b] = scale;
}

// Pass 2, one warp per codec block: the values, and the residual of what they leave out.
template <int Bits>
__global__ void values_kernel(std::uint8_t* q, float* residual, const int* bad, const float* scales, const float* x,
                              std::size_t n, std::size_t block, std::size_t blocks) {
  const std::size_t b = blockIdx.x * static_cast<std::size_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const unsigned lane = threadIdx.x % 32;
  if (b >= blocks || *bad != 0) return;
  const std::size_t start = b * block, end = start + block < n ? start + block : n;
  const float scale = scales[b];
  auto keep_residual = [&](std::size_t i, float t, int qi) {
    if (residual != nullptr) residual[i] = __fsub_rn(t, __fmul_rn(static_cast<float>(qi), scale));
  };
  if constexpr (Bits == 8) {
    for (std::size_t i = start + lane; i < end; i += 32) {
      const float t = sent(x, residual, i);
      const int qi = quantize<8>(t, scale);
      q[i] = static_cast<std::uint8_t>(qi);
      keep_residual(i, t, qi);
    }
  } else {
    for (std::size_t i = start + 2 * lane; i < end; i += 64) {  // start is even: whole bytes per block
      const float t0 = sent(x, residual, i);
      const int q0 = quantize<4>(t0, scale);
      int q1 = 0;
      if (i + 1 < end) {
        const float t1 = sent(x, residual, i + 1);
        q1 = quantize<4>(t1, scale);
        keep_residual(i + 1, t1, q1);
      }
      keep_residual(i, t0, q0);
      q[i / 2] = static_cast<std::uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
    }
  }
}

template <int Bits>
__global__ void decode_kernel(float* y, int* bad, const float* scales, const std::uint8_t* q, std::size_t n,
                              std::size_t block, std::size_t blocks) {
  const std::size_t b = blockIdx.x * static_cast<std::size_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const unsigned lane = threadIdx.x % 32;
  if (b >= blocks) return;
  const float scale = scales[b];
  if (!(scale >= 0.0f) || !isfinite(__fmul_rn(scale, kQmax<Bits>))) {
    if (lane == 0) *bad = 1;
    return;
  }
  const std::size_t start = b * block, end = start + block < n ? start + block : n;
  for (std::size_t i = start + lane; i < end; i += 32) {
    int qi;
    if constexpr (Bits == 8) {
      qi = static_cast<std::int8_t>(q[i]);
    } else {
      const std::uint8_t byte = q[i / 2];
      const int nibble = (i % 2 == 0) ? (byte & 0xF) : (byte >> 4);
      qi = nibble >= 8 ? nibble - 16 : nibble;
    }
    // Values outside [-qmax, qmax] are never encoded; clamped like the CPU decoder does.
    y[i] = __fmul_rn(static_cast<float>(max(qi, -static_cast<int>(kQmax<Bits>))), scale);
  }
}

bool read_flag(const int* flag, cudaStream_t stream) {
  int host = 0;
  MERIDIAN_CUDA(cudaMemcpyAsync(&host, flag, sizeof host, cudaMemcpyDeviceToHost, stream));
  MERIDIAN_CUDA(cudaStreamSynchronize(stream));
  return host != 0;
}

template <int Bits>
bool encode_bits(const float* x, float* residual, std::size_t n, std::size_t block, void* out, cudaStream_t stream) {
  const std::size_t blocks = (n + block - 1) / block;
  auto* scales = static_cast<float*>(out);
  auto* values = reinterpret_cast<std::uint8_t*>(scales + blocks);
  StreamScratch<int> bad(1, stream);
  MERIDIAN_CUDA(cudaMemsetAsync(bad.data(), 0, sizeof(int), stream));
  if (blocks > 0) {
    const unsigned grid = grid_for(blocks, kWarpsPerBlock);
    scales_kernel<Bits><<<grid, kWarpsPerBlock * 32, 0, stream>>>(scales, bad.data(), x, residual, n, block, blocks);
    MERIDIAN_CUDA_LAUNCHED();
    values_kernel<Bits><<<grid, kWarpsPerBlock * 32, 0, stream>>>(values, residual, bad.data(), scales, x, n, block,
                                                                  blocks);
    MERIDIAN_CUDA_LAUNCHED();
  }
  return !read_flag(bad.data(), stream);
}

template <int Bits>
bool decode_bits(const void* in, std::size_t n, std::size_t block, float* y, cudaStream_t stream) {
  const std::size_t blocks = (n + block - 1) / block;
  const auto* scales = static_cast<const float*>(in);
  const auto* values = reinterpret_cast<const std::uint8_t*>(scales + blocks);
  StreamScratch<int> bad(1, stream);
  MERIDIAN_CUDA(cudaMemsetAsync(bad.data(), 0, sizeof(int), stream));
  if (blocks > 0) {
    decode_kernel<Bits><<<grid_for(blocks, kWarpsPerBlock), kWarpsPerBlock * 32, 0, stream>>>(y, bad.data(), scales,
                                                                                             values, n, block, blocks);
    MERIDIAN_CUDA_LAUNCHED();
  }
  return !read_flag(bad.data(), stream);
}

void check_arguments(int bits, std::size_t block, const void* p) {
  if ((bits != 8 && bits != 4) || block == 0 || (bits == 4 && block % 2 != 0) ||
      reinterpret_cast<std::uintptr_t>(p) % 4 != 0)
    throw CudaError("block codec: bits must be 8 or 4, block > 0 (even for int4), the payload 4-byte aligned");
}

}  // namespace

bool encode_blockwise(int bits, const float* x, float* residual, std::size_t n, std::size_t block, void* out,
                      cudaStream_t stream) {
  check_arguments(bits, block, out);
  return bits == 8 ? encode_bits<8>(x, residual, n, block, out, stream)
                   : encode_bits<4>(x, residual, n, block, out, stream);
}

bool decode_blockwise(int bits, const void* in, std::size_t n, std::size_t block, float* y, cudaStream_t stream) {
  check_arguments(bits, block, in);
  return bits == 8 ? decode_bits<8>(in, n, block, y, stream) : decode_bits<4>(in, n, block, y, stream);
}

}  // namespace meridian::kernels::cuda
