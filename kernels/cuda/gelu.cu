#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/gelu.hpp"
#include "kernels/cuda/packed_map.cuh"

namespace meridian::kernels::cuda {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

struct GeluForward {
  __device__ float operator()(float x, float) const {
    return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kCubic * x * x * x)));
  }
};

// dinp = GELU'(x) * dout.
struct GeluBackward {
  __device__ float operator()(float x, float dout) const {
    const float th = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
    const float sech2 = 1.0f - th * th;
    const float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    return grad * dout;
  }
};

}  // namespace

template <class T>
void gelu_forward(T* out, const T* inp, std::size_t n, cudaStream_t stream) {
  map_elements(out, inp, static_cast<const T*>(nullptr), n, GeluForward{}, stream);
}

template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, std::size_t n, cudaStream_t stream) {
  map_elements(dinp, inp, dout, n, GeluBackward{}, stream);
}

template void gelu_forward<float>(float*, const float*, std::size_t, cudaStream_t);
template void gelu_forward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, std::size_t, cudaStream_t);
template void gelu_backward<float>(float*, const float*, const float*, std::size_t, cudaStream_t);
template void gelu_backward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, std::size_t,
                                           cudaStream_t);
template void gelu_forward<__half>(__half*, const __half*, std::size_t, cudaStream_t);
template void gelu_backward<__half>(__half*, const __half*, const __half*, std::size_t, cudaStream_t);

}  // namespace meridian::kernels::cuda
