#pragma once
// Dynamic loss scaling for fp16 training, as a pure state machine: the loss is multiplied by
// scale() before backward, the gradients are divided by it (kernels/cuda/elementwise.hpp:
// unscale_gradients) and checked; then update(overflow) says whether to apply the step. An
// overflow skips the step and halves the scale (never below min_scale); growth_interval clean
// steps in a row double it (never above max_scale). bf16 needs none of this: its exponent range
// is fp32's.
//
// A scale that keeps falling is a symptom of divergence, not a numerical nuisance: OPT-175B's
// divergences coincided with its loss scale collapsing. `collapsing` flags a scale at or below
// collapse_scale so that a divergence guard can act (roll back, lower the learning rate) before
// the loss itself shows it.
#include <cstdint>

namespace meridian {

struct LossScaleOptions {
  float initial = 65536.0f;  // 2^16
  int growth_interval = 2000;
  float min_scale = 1.0f;
  float max_scale = 16777216.0f;  // 2^24: beyond it fp16 gradients of O(1) would overflow anyway
  float collapse_scale = 128.0f;
};

struct LossScaleDecision {
  bool apply_step = true;   // false: the gradients overflowed; skip the optimizer step
  bool grew = false;        // the scale doubled
  bool backed_off = false;  // the scale halved (or would have, at the floor)
  bool collapsing = false;  // the scale is at or below collapse_scale: a divergence signal
};

class LossScaler {
 public:
  // Error(Config) when the options are inconsistent (non-positive or unordered bounds, interval < 1).
  explicit LossScaler(const LossScaleOptions& options = {});

  const LossScaleOptions& options() const { return options_; }
  float scale() const { return scale_; }
  int clean_steps() const { return clean_steps_; }
  std::int64_t skipped_steps() const { return skipped_; }

  LossScaleDecision update(bool overflow);

  // A checkpoint keeps (scale, clean steps, skipped steps) so that a resumed run scales the same.
  void restore(float scale, int clean_steps, std::int64_t skipped_steps);

 private:
  LossScaleOptions options_;
  float scale_;
  int clean_steps_ = 0;
  std::int64_t skipped_ = 0;
};

}  // namespace meridian
