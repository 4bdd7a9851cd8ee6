#include "core/optim/cuda_adamw.hpp"

#include "kernels/cuda/adamw.hpp"

namespace meridian {

CudaAdamW::CudaAdamW(const ParamLayout& layout, AdamWOptions options, cudaStream_t stream)
    : options_(options), ranges_(decay_ranges(layout)), stream_(stream), m_(layout.total()), v_(layout.total()) {
  m_.zero();
  v_.zero();
}

void CudaAdamW::step(float* params, const float* grads, float lr, __nv_bfloat16* weight_copy) {
  ++t_;
  for (const auto& r : ranges_) {
    const kernels::AdamWStep s{lr, options_.beta1, options_.beta2, options_.eps,
                               r.decay ? options_.weight_decay : 0.0f, static_cast<int>(t_)};
    kernels::cuda::adamw_update(params + r.offset, grads + r.offset, m_.data() + r.offset, v_.data() + r.offset,
                                r.count, s, weight_copy != nullptr ? weight_copy + r.offset : nullptr, stream_);
  }
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
