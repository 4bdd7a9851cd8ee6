#include "core/optim/loss_scale.hpp"

#include <algorithm>
#include <cmath>

#include "core/util/error.hpp"

namespace meridian {

namespace {

bool positive_finite(float x) { return std::isfinite(x) && x > 0.0f; }

}  // namespace

LossScaler::LossScaler(const LossScaleOptions& options) : options_(options), scale_(options.initial) {
  const auto& o = options_;
  if (!positive_finite(o.min_scale) || !positive_finite(o.max_scale) || o.min_scale > o.max_scale ||
      !(o.initial >= o.min_scale && o.initial <= o.max_scale) || o.growth_interval < 1 ||
      !std::isfinite(o.collapse_scale))
    throw make_error(ErrorKind::Config, "loss scaling: need 0 < min_scale (", o.min_scale, ") <= initial (", o.initial,
                     ") <= max_scale (", o.max_scale, "), growth_interval >= 1 (", o.growth_interval,
                     ") and a finite collapse_scale (", o.collapse_scale, ")");
}

LossScaleDecision LossScaler::update(bool overflow) {
  LossScaleDecision d;
  if (overflow) {
    d.apply_step = false;
    d.backed_off = true;
    ++skipped_;
    clean_steps_ = 0;
    scale_ = std::max(options_.min_scale, scale_ * 0.5f);
  } else if (++clean_steps_ >= options_.growth_interval) {
    clean_steps_ = 0;
    const float grown = std::min(options_.max_scale, scale_ * 2.0f);
    d.grew = grown > scale_;
    scale_ = grown;
  }
  d.collapsing = scale_ <= options_.collapse_scale;
  return d;
}

void LossScaler::restore(float scale, int clean_steps, std::int64_t skipped_steps) {
  if (!(scale >= options_.min_scale && scale <= options_.max_scale) || clean_steps < 0 ||
      clean_steps >= options_.growth_interval || skipped_steps < 0)
    throw make_error(ErrorKind::Checkpoint, "loss scaler state out of range: scale ", scale, ", clean steps ",
                     clean_steps, ", skipped ", skipped_steps);
  scale_ = scale;
  clean_steps_ = clean_steps;
  skipped_ = skipped_steps;
}

}  // namespace meridian
