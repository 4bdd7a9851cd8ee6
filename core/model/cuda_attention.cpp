#include "core/model/cuda_attention.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>
#include <variant>

#include "core/util/error.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/attention_tiled.hpp"

namespace meridian {

namespace kc = kernels::cuda;

template <class T>
DeviceAttention<T>::DeviceAttention(CudaAttention asked, kc::Blas& blas, cudaStream_t stream, int Tn, int NH, int KV,
                                    int hs)
    : kind_(asked), blas_(blas), stream_(stream), Tn_(Tn), NH_(NH), KV_(KV), hs_(hs) {
  MERIDIAN_CHECK(asked != CudaAttention::Tiled || (KV == NH && hs <= kc::kTiledMaxHeadSize), "tiled attention with ",
                 NH, " query heads, ", KV, " key/value heads of ", hs, " channels");
  if (asked == CudaAttention::Tiled) description_ = "tiled (O(T) memory, no tensor cores)";
  if (asked == CudaAttention::Materialized) description_ = "materialized (cuBLAS products, (T, T) probabilities kept)";
  if (asked != CudaAttention::Cudnn) return;
  kind_ = CudaAttention::Materialized;
  const std::string fallback = "materialized (cuDNN's flash attention not used: ";
  if constexpr (std::is_same_v<T, float>) {
    description_ = fallback + "it takes bf16 or fp16, this model computes in fp32)";
  } else {
    auto opened = kc::CudnnAttention::open(stream);
    if (auto* why = std::get_if<std::string>(&opened)) {
      description_ = fallback + *why + ")";
      return;
    }
    auto cudnn = std::move(std::get<std::unique_ptr<kc::CudnnAttention>>(opened));
    if (const std::string why = cudnn->template unsupported<T>(shape(1)); !why.empty()) {
      description_ = fallback + "cuDNN " + cudnn->version() + " refuses this shape: " + why + ")";
      return;
    }
    cudnn_ = std::move(cudnn);
    kind_ = CudaAttention::Cudnn;
  }
}

template <class T>
std::string DeviceAttention<T>::describe() const {
  if (kind_ != CudaAttention::Cudnn) return description_;
  // The workspace grows with the largest batch its graphs were built for.
  return "cuDNN flash attention (cuDNN " + cudnn_->version() + ", deterministic backward, workspace " +
         std::to_string(cudnn_->workspace_bytes() >> 20) + " MiB)";
}

template <class T>
bool DeviceAttention<T>::prepare(int B) {
  if constexpr (std::is_same_v<T, float>) {
    return false;  // fp32 never runs cuDNN's kernels
  } else {
    if (kind_ != CudaAttention::Cudnn) return false;
    const std::string why = cudnn_->template unsupported<T>(shape(B));
    if (why.empty()) return false;
    description_ = "materialized from B=" + std::to_string(B) + " on (cuDNN " + cudnn_->version() +
                   " refuses that batch size: " + why + ")";
    cudnn_.reset();
    kind_ = CudaAttention::Materialized;
    return true;
  }
}

template <class T>
void DeviceAttention<T>::forward(T* out, T* probs, float* lse, const T* qkv, int B) {
  switch (kind_) {
    case CudaAttention::Materialized:
      return kc::attention_forward(blas_, out, probs, qkv, B, Tn_, NH_, KV_, hs_);
    case CudaAttention::Tiled:
      return kc::attention_tiled_forward(out, lse, qkv, B, Tn_, NH_ * hs_, NH_, stream_);
    case CudaAttention::Cudnn:
      if constexpr (!std::is_same_v<T, float>) return cudnn_->forward(out, lse, qkv, shape(B));
      break;
  }
  MERIDIAN_CHECK(false, "attention kind ", static_cast<int>(kind_), " for this precision");
}

template <class T>
void DeviceAttention<T>::backward(T* dqkv, const T* dout, const T* out, const T* qkv, const T* probs, const float* lse,
                                  int B) {
  switch (kind_) {
    case CudaAttention::Materialized:
      return kc::attention_backward(blas_, dqkv, dout, qkv, probs, B, Tn_, NH_, KV_, hs_);
    case CudaAttention::Tiled:
      return kc::attention_tiled_backward(dqkv, dout, out, qkv, lse, B, Tn_, NH_ * hs_, NH_, stream_);
    case CudaAttention::Cudnn:
      if constexpr (!std::is_same_v<T, float>) return cudnn_->backward(dqkv, dout, out, qkv, lse, shape(B));
      break;
  }
  MERIDIAN_CHECK(false, "attention kind ", static_cast<int>(kind_), " for this precision");
}

template class DeviceAttention<float>;
template class DeviceAttention<__nv_bfloat16>;
template class DeviceAttention<__half>;

}  // namespace meridian
