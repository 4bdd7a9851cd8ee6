#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/encoder.hpp"

namespace meridian::kernels::cuda {
namespace {

constexpr unsigned kThreads = 256;

template <class T>
__global__ void encoder_forward_kernel(T* out, const std::int32_t* tokens, const T* wte, const T* wpe, int BT,
                                       int Tn, int C) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<std::size_t>(BT) * C) return;
  const int bt = static_cast<int>(i / C), c = static_cast<int>(i % C);
  const float position = wpe == nullptr ? 0.0f : to_f32(wpe[static_cast<std::size_t>(bt % Tn) * C + c]);
  out[i] = from_f32<T>(to_f32(wte[static_cast<std::size_t>(tokens[bt]) * C + c]) + position);
}

// One thread per (t, c), batches in order.
template <class T>
__global__ void position_grad_kernel(float* dwpe, const T* dout, int B, int Tn, int C) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<std::size_t>(Tn) * C) return;
  float acc = dwpe[i];
  for (int b = 0; b < B; ++b) acc += to_f32(dout[static_cast<std::size_t>(b) * Tn * C + i]);
  dwpe[i] = acc;
}

__global__ void iota_kernel(int* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = i;
}

// One block per sorted position; only the first position of each token's run works, adding the
// run's rows in position order.
template <class T>
__global__ void token_grad_kernel(float* dwte, const T* dout, const std::int32_t* sorted_tokens,
                                  const int* sorted_positions, int BT, int C) {
  const int first = blockIdx.x;
  const std::int32_t token = sorted_tokens[first];
  if (first > 0 && sorted_tokens[first - 1] == token) return;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = dwte[static_cast<std::size_t>(token) * C + c];
    for (int j = first; j < BT && sorted_tokens[j] == token; ++j)
      acc += to_f32(dout[static_cast<std::size_t>(sorted_positions[j]) * C + c]);
    dwte[static_cast<std::size_t>(token) * C + c] = acc;
  }
}

}  // namespace

template <class T>
void encoder_forward(T* out, const std::int32_t* tokens, const T* wte, const T* wpe, int B, int Tn, int C,
                     cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(B) * Tn * C;
  encoder_forward_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(out, tokens, wte, wpe, B * Tn, Tn, C);
  MERIDIAN_CUDA_LAUNCHED();
}

template <class T>
void encoder_backward(float* dwte, float* dwpe, const T* dout, const std::int32_t* tokens, int B, int Tn, int C,
                      cudaStream_t stream) {
  const int BT = B * Tn;
  if (dwpe != nullptr) {
    position_grad_kernel<<<grid_for(static_cast<std::size_t>(Tn) * C, kThreads), kThreads, 0, stream>>>(dwpe, dout, B,
                                                                                                     Tn, C);
    MERIDIAN_CUDA_LAUNCHED();
  }

  StreamScratch<int> positions(2 * static_cast<std::size_t>(BT), stream);
  StreamScratch<std::int32_t> sorted_tokens(BT, stream);
  iota_kernel<<<grid_for(BT, kThreads), kThreads, 0, stream>>>(positions.data(), BT);
  MERIDIAN_CUDA_LAUNCHED();
  std::size_t temp_bytes = 0;
  MERIDIAN_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, tokens, sorted_tokens.data(), positions.data(),
                                                positions.data() + BT, BT, 0, 32, stream));
  StreamScratch<unsigned char> temp(temp_bytes, stream);
  MERIDIAN_CUDA(cub::DeviceRadixSort::SortPairs(temp.data(), temp_bytes, tokens, sorted_tokens.data(),
                                                positions.data(), positions.data() + BT, BT, 0, 32, stream));
  token_grad_kernel<<<BT, kThreads, 0, stream>>>(dwte, dout, sorted_tokens.data(), positions.data() + BT, BT, C);
  MERIDIAN_CUDA_LAUNCHED();
}

#define MERIDIAN_ENCODER(T)                                                                                   \
  template void encoder_forward<T>(T*, const std::int32_t*, const T*, const T*, int, int, int, cudaStream_t); \
  template void encoder_backward<T>(float*, float*, const T*, const std::int32_t*, int, int, int, cudaStream_t);
MERIDIAN_ENCODER(float)
MERIDIAN_ENCODER(__nv_bfloat16)
MERIDIAN_ENCODER(__half)
#undef MERIDIAN_ENCODER

}  // namespace meridian::kernels::cuda
