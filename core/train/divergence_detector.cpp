#include "core/train/divergence_detector.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace meridian {

std::string_view to_string(Divergence d) {
  switch (d) {
    case Divergence::None: return "none";
    case Divergence::NonFinite: return "nonfinite";
    case Divergence::LossSpike: return "loss_spike";
    case Divergence::GradNormExplosion: return "grad_norm_explosion";
    case Divergence::LossScaleCollapse: return "loss_scale_collapse";
  }
  return "?";
}

Divergence DivergenceDetector::judge_scale(const LossScaleReading& scale, DivergenceVerdict& v) const {
  // Falls between consecutive scales the window saw, then to this step's: growth in between does
  // not undo them (a scale that halves and regrows over and over is as sick as one that only falls).
  std::optional<double> before;
  for (const auto& s : window_) {
    if (s.scale && before && *s.scale < *before) ++v.scale_halvings;
    if (s.scale) before = s.scale;
  }
  if (before && scale.scale < *before) ++v.scale_halvings;
  const bool near_floor = scale.scale <= options_.loss_scale_floor_factor * scale.floor;
  return near_floor || v.scale_halvings >= options_.loss_scale_halvings ? Divergence::LossScaleCollapse
                                                                         : Divergence::None;
}

DivergenceVerdict DivergenceDetector::judge(double loss, double grad_norm, std::optional<LossScaleReading> scale) const {
  DivergenceVerdict v;
  if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
    v.kind = Divergence::NonFinite;
    return v;
  }
  if (scale && (v.kind = judge_scale(*scale, v)) != Divergence::None) return v;
  if (window_.size() < static_cast<std::size_t>(options_.min_history)) return v;
  const double n = static_cast<double>(window_.size());
  double sum = 0;
  for (const auto& s : window_) sum += s.loss;
  v.mean_loss = sum / n;
  double squares = 0;
  for (const auto& s : window_) squares += (s.loss - v.mean_loss) * (s.loss - v.mean_loss);
  // A plateau has almost no spread; the floor keeps ordinary noise on it from reading as a spike.
  const double deviation = std::max(std::sqrt(squares / n), options_.min_rel_std * std::abs(v.mean_loss));
  v.z = deviation > 0 ? (loss - v.mean_loss) / deviation : 0;

  // A norm of 0 is a step that took no gradient (an fp16 step skipped on overflow): not a sample.
  std::vector<double> norms;
  norms.reserve(window_.size());
  for (const auto& s : window_)
    if (s.grad_norm > 0) norms.push_back(s.grad_norm);
  if (!norms.empty()) {
    const auto mid = norms.begin() + static_cast<std::ptrdiff_t>(norms.size() / 2);
    std::nth_element(norms.begin(), mid, norms.end());
    v.median_grad_norm = *mid;
  }
  v.grad_ratio = v.median_grad_norm > 0 ? grad_norm / v.median_grad_norm : 0;

  if (deviation > 0 && v.z > options_.loss_z) v.kind = Divergence::LossSpike;
  else if (v.median_grad_norm > 0 && v.grad_ratio > options_.grad_norm_ratio) v.kind = Divergence::GradNormExplosion;
  return v;
}

void DivergenceDetector::accept(double loss, double grad_norm, std::optional<LossScaleReading> scale) {
  window_.push_back({loss, grad_norm, scale ? std::optional<double>(scale->scale) : std::nullopt});
  while (window_.size() > static_cast<std::size_t>(options_.window)) window_.pop_front();
}

}  // namespace meridian
