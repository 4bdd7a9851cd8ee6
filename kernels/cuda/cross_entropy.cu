#include "kernels/cuda/cross_entropy.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_math.cuh"

namespace meridian::kernels::cuda {
namespace {

constexpr unsigned kThreads = 512;

// Every read of the row happens before the last barrier of the second reduction, so a block may
// then overwrite the row in place (dlogits aliasing logits).
template <class T, bool kBackward>
__global__ void cross_entropy_kernel(T* dlogits, float* losses, const T* logits, const std::int32_t* targets, int V,
                                     int ld, float dloss) {
  const std::size_t row = blockIdx.x;
  const T* x = logits + row * ld;
  const int target = targets[row];
  float maxv = MaxOp::identity;
  for (int i = threadIdx.x; i < V; i += blockDim.x) maxv = fmaxf(maxv, to_f32(x[i]));
  maxv = block_reduce(maxv, MaxOp{});
  const float target_logit = to_f32(x[target]);
  float sum = 0.0f;
  for (int i = threadIdx.x; i < V; i += blockDim.x) sum += expf(to_f32(x[i]) - maxv);
  sum = block_reduce(sum, SumOp{});
  if (threadIdx.x == 0) losses[row] = logf(sum) - (target_logit - maxv);
  if constexpr (kBackward) {
    T* dx = dlogits + row * ld;
    const float inv = dloss / sum;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
      const float p = expf(to_f32(x[i]) - maxv) * inv;
      dx[i] = from_f32<T>(i == target ? p - dloss : p);
    }
  }
}

}  // namespace

template <class T>
void cross_entropy_forward(float* losses, const T* logits, const std::int32_t* targets, int N, int V,
                           cudaStream_t stream, int ld) {
  if (N == 0) return;
  cross_entropy_kernel<T, false><<<N, kThreads, 0, stream>>>(nullptr, losses, logits, targets, V, ld > 0 ? ld : V,
                                                             0.0f);
  MERIDIAN_CUDA_LAUNCHED();
}

template <class T>
void cross_entropy_forward_backward(T* dlogits, float* losses, const T* logits, const std::int32_t* targets, int N,
                                    int V, float dloss, cudaStream_t stream, int ld) {
  if (N == 0) return;
  cross_entropy_kernel<T, true><<<N, kThreads, 0, stream>>>(dlogits, losses, logits, targets, V, ld > 0 ? ld : V,
                                                            dloss);
  MERIDIAN_CUDA_LAUNCHED();
}

template void cross_entropy_forward<float>(float*, const float*, const std::int32_t*, int, int, cudaStream_t, int);
template void cross_entropy_forward<__nv_bfloat16>(float*, const __nv_bfloat16*, const std::int32_t*, int, int,
                                                   cudaStream_t, int);
template void cross_entropy_forward_backward<float>(float*, float*, const float*, const std::int32_t*, int, int,
                                                    float, cudaStream_t, int);
template void cross_entropy_forward_backward<__nv_bfloat16>(__nv_bfloat16*, float*, const __nv_bfloat16*,
                                                            const std::int32_t*, int, int, float, cudaStream_t, int);
template void cross_entropy_forward<__half>(float*, const __half*, const std::int32_t*, int, int, cudaStream_t, int);
template void cross_entropy_forward_backward<__half>(__half*, float*, const __half*, const std::int32_t*, int, int,
                                                     float, cudaStream_t, int);

}  // namespace meridian::kernels::cuda
