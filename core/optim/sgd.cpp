#include "core/optim/sgd.hpp"

#include "core/util/error.hpp"

namespace meridian {

void sgd_step(const ParamLayout& layout, std::span<float> params, std::span<const float> grads, float lr,
              float weight_decay) {
  MERIDIAN_CHECK(params.size() == layout.total() && grads.size() == layout.total(), "params=", params.size(),
                 " grads=", grads.size(), " layout=", layout.total());
  for (const auto& view : layout.views()) {
    const float decay = view.decay ? weight_decay : 0.0f;
    float* p = params.data() + view.offset;
    const float* g = grads.data() + view.offset;
    for (std::size_t i = 0; i < view.numel; ++i) p[i] -= lr * (g[i] + decay * p[i]);
  }
}

}  // namespace meridian
