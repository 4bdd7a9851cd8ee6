#include "core/optim/muon.hpp"

#include <algorithm>
#include <cmath>

#include "core/util/error.hpp"
#include "kernels/cpu/newton_schulz.hpp"

namespace meridian {

bool muon_takes(const ParamView& view) { return view.shape.size() == 2 && view.layer >= 0; }

std::vector<DecayRange> ranges_without_muon(const ParamLayout& layout) {
  std::vector<DecayRange> ranges;
  for (const auto& r : decay_ranges(layout)) {
    // Split each range around the Muon views inside it.
    std::size_t at = r.offset;
    for (const auto& v : layout.views()) {
      if (!muon_takes(v) || v.offset < r.offset || v.offset >= r.offset + r.count) continue;
      if (v.offset > at) ranges.push_back({at, v.offset - at, r.decay});
      at = v.offset + v.numel;
    }
    if (at < r.offset + r.count) ranges.push_back({at, r.offset + r.count - at, r.decay});
  }
  return ranges;
}

Muon::Muon(const ParamLayout& layout, MuonOptions options) : options_(options) {
  MERIDIAN_CHECK(options.momentum >= 0 && options.momentum < 1 && options.ns_steps >= 1, "momentum=",
                 options.momentum, " ns_steps=", options.ns_steps);
  std::size_t largest = 0, work = 0;
  for (const auto& v : layout.views())
    if (muon_takes(v)) {
      views_.push_back(v);
      largest = std::max(largest, v.numel);
      work = std::max<std::size_t>(
          work, static_cast<std::size_t>(kernels::newton_schulz_work(static_cast<int>(v.shape[0]), static_cast<int>(v.shape[1]))));
    }
  update_.resize(largest);
  orthogonal_.resize(largest);
  work_.resize(work);
}

void Muon::step(std::span<float> params, std::span<const float> grads, std::span<float> momentum, float lr) {
  MERIDIAN_CHECK(params.size() == grads.size() && params.size() == momentum.size(), "params=", params.size(),
                 " grads=", grads.size(), " momentum=", momentum.size());
  const float mu = options_.momentum;
  for (const auto& v : views_) {
    const int rows = static_cast<int>(v.shape[0]), cols = static_cast<int>(v.shape[1]);
    float* w = params.data() + v.offset;
    const float* g = grads.data() + v.offset;
    float* m = momentum.data() + v.offset;
    for (std::size_t i = 0; i < v.numel; ++i) {
      m[i] = mu * m[i] + g[i];
      update_[i] = options_.nesterov ? g[i] + mu * m[i] : m[i];
    }
    kernels::newton_schulz(update_.data(), orthogonal_.data(), rows, cols, options_.ns_steps, work_.data());
    const float scale = 0.2f * std::sqrt(static_cast<float>(std::max(rows, cols)));
    const float decay = v.decay ? options_.weight_decay : 0.0f;
    for (std::size_t i = 0; i < v.numel; ++i) w[i] -= lr * (scale * orthogonal_[i] + decay * w[i]);
  }
}

}  // namespace meridian
