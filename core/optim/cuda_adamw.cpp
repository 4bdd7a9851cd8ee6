#include "core/optim/cuda_adamw.hpp"

#include "core/util/error.hpp"
#include "kernels/cuda/adamw.hpp"

namespace meridian {

CudaAdamW::CudaAdamW(const ParamLayout& layout, AdamWOptions options, cudaStream_t stream)
    : options_(options), ranges_(decay_ranges(layout)), stream_(stream), m_(layout.total()), v_(layout.total()) {
  m_.zero();
  v_.zero();
}

void CudaAdamW::step(float* params, const float* grads, float lr, __nv_bfloat16* weight_copy) {
  update(params, grads, lr, weight_copy);
}

void CudaAdamW::step(float* params, const float* grads, float lr, __half* weight_copy) {
  update(params, grads, lr, weight_copy);
}

template <class Copy>
void CudaAdamW::update(float* params, const float* grads, float lr, Copy* weight_copy) {
  ++t_;
  for (const auto& r : ranges_) {
    const kernels::AdamWStep s{lr, options_.beta1, options_.beta2, options_.eps,
                               r.decay ? options_.weight_decay : 0.0f, static_cast<int>(t_)};
    kernels::cuda::adamw_update(params + r.offset, grads + r.offset, m_.data() + r.offset, v_.data() + r.offset,
                                r.count, s, weight_copy != nullptr ? weight_copy + r.offset : nullptr, stream_);
  }
}

void CudaAdamW::upload_moments(std::span<const float> m, std::span<const float> v, std::int64_t steps_taken) {
  MERIDIAN_CHECK(m.size() == m_.size() && v.size() == v_.size() && steps_taken >= 0, "moments of ", m.size(), " and ",
                 v.size(), " values for ", m_.size(), ", steps ", steps_taken);
  MERIDIAN_CUDA(cudaStreamSynchronize(stream_));  // no queued update may land on the restored state
  MERIDIAN_CUDA(cudaMemcpy(m_.data(), m.data(), m.size_bytes(), cudaMemcpyHostToDevice));
  MERIDIAN_CUDA(cudaMemcpy(v_.data(), v.data(), v.size_bytes(), cudaMemcpyHostToDevice));
  t_ = steps_taken;
}

std::vector<float> CudaAdamW::download_m() const {
  MERIDIAN_CUDA(cudaStreamSynchronize(stream_));
  return m_.download();
}

std::vector<float> CudaAdamW::download_v() const {
  MERIDIAN_CUDA(cudaStreamSynchronize(stream_));
  return v_.download();
}

}  // namespace meridian
