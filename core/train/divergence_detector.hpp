#pragma once
// Whether a training step is diverging, judged from its loss and gradient norm against a moving
// window of the healthy steps before it, and under fp16 from the dynamic loss scale: a scale that
// fell to within guard.loss_scale_floor_factor of its floor, or halved guard.loss_scale_halvings
// times over the window, is collapsing (OPT-175B's divergences came with a collapsing scale).
// Pure: the verdict depends on (loss, grad norm, scale, window, options) only, so replicas fed
// the same all-reduced values take the same decision.
#include <cstddef>
#include <deque>
#include <optional>
#include <string_view>

#include "core/config/job_config.hpp"

namespace meridian {

enum class Divergence { None, NonFinite, LossSpike, GradNormExplosion, LossScaleCollapse };
std::string_view to_string(Divergence d);

// An fp16 step's loss scale (LossScaler::scale()) and the scaler's floor (its min_scale).
struct LossScaleReading {
  double scale = 0;
  double floor = 0;
};

struct DivergenceVerdict {
  Divergence kind = Divergence::None;
  double z = 0;                 // (loss - mean) / deviation over the window; 0 before min_history
  double grad_ratio = 0;        // grad norm / the window's median; 0 before min_history
  double mean_loss = 0;         // over the window
  double median_grad_norm = 0;  // over the window
  int scale_halvings = 0;       // the loss scale's falls over the window and this step; 0 without a scale
  bool diverged() const { return kind != Divergence::None; }
};

class DivergenceDetector {
 public:
  explicit DivergenceDetector(const JobConfig::Guard& options) : options_(options) {}

  // The verdict on one step; changes nothing. `scale`: the step's loss scale under fp16, none otherwise.
  DivergenceVerdict judge(double loss, double grad_norm, std::optional<LossScaleReading> scale = {}) const;
  // Adds a step judged healthy to the window (the oldest leaves once it is full).
  void accept(double loss, double grad_norm, std::optional<LossScaleReading> scale = {});
  void clear() { window_.clear(); }
  std::size_t history() const { return window_.size(); }

 private:
  struct Seen {
    double loss, grad_norm;
    std::optional<double> scale;
  };
  // Divergence::LossScaleCollapse or None; the falls counted into `v`.
  Divergence judge_scale(const LossScaleReading& scale, DivergenceVerdict& v) const;
  JobConfig::Guard options_;
  std::deque<Seen> window_;
};

}  // namespace meridian
