#include "core/optim/adamw.hpp"

#include <utility>

#include "core/util/error.hpp"
#include "kernels/cpu/adamw.hpp"

namespace meridian {

std::vector<DecayRange> decay_ranges(const ParamLayout& layout) {
  std::vector<DecayRange> ranges;
  for (const auto& view : layout.views()) {
    if (!ranges.empty() && ranges.back().decay == view.decay && ranges.back().offset + ranges.back().count == view.offset)
      ranges.back().count += view.numel;
    else
      ranges.push_back({view.offset, view.numel, view.decay});
  }
  return ranges;
}

AdamW::AdamW(const ParamLayout& layout, AdamWOptions options) : AdamW(layout, options, decay_ranges(layout)) {}

AdamW::AdamW(const ParamLayout& layout, AdamWOptions options, std::vector<DecayRange> ranges)
    : options_(options), ranges_(std::move(ranges)), m_(layout.total(), 0.0f), v_(layout.total(), 0.0f) {
  for (const auto& r : ranges_)
    MERIDIAN_CHECK(r.offset + r.count <= layout.total(), "range ", r.offset, "+", r.count, " of ", layout.total());
}

void AdamW::step(std::span<float> params, std::span<const float> grads, float lr) {
  MERIDIAN_CHECK(params.size() == m_.size() && grads.size() == m_.size(), "params=", params.size(),
                 " grads=", grads.size(), " state=", m_.size());
  ++t_;
  for (const auto& r : ranges_) {
    const kernels::AdamWStep s{lr, options_.beta1, options_.beta2, options_.eps,
                               r.decay ? options_.weight_decay : 0.0f, static_cast<int>(t_)};
    kernels::adamw_update(params.data() + r.offset, grads.data() + r.offset, m_.data() + r.offset,
                          v_.data() + r.offset, r.count, s);
  }
}

}  // namespace meridian
