#include <cmath>

#include "kernels/cuda/adamw.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_math.cuh"

namespace meridian::kernels::cuda {
namespace {

constexpr unsigned kThreads = 256;

template <class Copy>
__global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, std::size_t n, float lr, float b1,
                             float b2, float eps, float wd, float c1, float c2, Copy* param_copy) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float g = grad[i];
  const float mi = b1 * m[i] + (1.0f - b1) * g;
  const float vi = b2 * v[i] + (1.0f - b2) * g * g;
  m[i] = mi;
  v[i] = vi;
  const float p = param[i] - lr * ((mi * c1) / (sqrtf(vi * c2) + eps) + wd * param[i]);
  param[i] = p;
  if (param_copy != nullptr) param_copy[i] = from_f32<Copy>(p);
}

template <class Copy>
void launch(float* param, const float* grad, float* m, float* v, std::size_t n, const AdamWStep& s, Copy* param_copy,
            cudaStream_t stream) {
  if (n == 0) return;
  // Bias corrections on the host, as the CPU twin computes them (float pow).
  const float c1 = 1.0f / (1.0f - std::pow(s.beta1, static_cast<float>(s.t)));
  const float c2 = 1.0f / (1.0f - std::pow(s.beta2, static_cast<float>(s.t)));
  adamw_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(param, grad, m, v, n, s.lr, s.beta1, s.beta2, s.eps,
                                                               s.weight_decay, c1, c2, param_copy);
  MERIDIAN_CUDA_LAUNCHED();
}

}  // namespace

void adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n, const AdamWStep& s,
                  __nv_bfloat16* param_bf16, cudaStream_t stream) {
  launch(param, grad, m, v, n, s, param_bf16, stream);
}

void adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n, const AdamWStep& s,
                  __half* param_f16, cudaStream_t stream) {
  launch(param, grad, m, v, n, s, param_f16, stream);
}

}  // namespace meridian::kernels::cuda
