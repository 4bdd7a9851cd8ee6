#include "core/optim/adamw.hpp"

#include <algorithm>
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
    : options_(options), ranges_(std::move(ranges)), total_(layout.total()), m_(total_, 0.0f), v_(total_, 0.0f) {
  for (const auto& r : ranges_)
    MERIDIAN_CHECK(r.offset + r.count <= total_, "range ", r.offset, "+", r.count, " of ", total_);
}

AdamW::AdamW(const ParamLayout& layout, AdamWOptions options, ShardRange shard)
    : options_(options), total_(layout.total()), base_(shard.offset), m_(shard.count, 0.0f), v_(shard.count, 0.0f) {
  MERIDIAN_CHECK(shard.end() <= total_, "shard ", shard.offset, "+", shard.count, " of ", total_);
  for (const auto& r : decay_ranges(layout)) {
    const std::size_t from = std::max(r.offset, shard.offset), to = std::min(r.offset + r.count, shard.end());
    if (from < to) ranges_.push_back({from, to - from, r.decay});
  }
}

void AdamW::step(std::span<float> params, std::span<const float> grads, float lr) {
  MERIDIAN_CHECK(params.size() == total_ && grads.size() == total_, "params=", params.size(), " grads=", grads.size(),
                 " model=", total_);
  ++t_;
  for (const auto& r : ranges_) {
    const kernels::AdamWStep s{lr, options_.beta1, options_.beta2, options_.eps,
                               r.decay ? options_.weight_decay : 0.0f, static_cast<int>(t_)};
    kernels::adamw_update(params.data() + r.offset, grads.data() + r.offset, m_.data() + (r.offset - base_),
                          v_.data() + (r.offset - base_), r.count, s);
  }
}

}  // namespace meridian
