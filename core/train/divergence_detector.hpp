#pragma once
// Whether a training step is diverging, judged from its loss and gradient norm against a moving
// window of the healthy steps before it. Pure: the verdict depends on (loss, grad norm, window,
// options) only, so replicas fed the same all-reduced values take the same decision.
#include <cstddef>
#include <deque>
#include <string_view>

#include "core/config/job_config.hpp"

namespace meridian {

enum class Divergence { None, NonFinite, LossSpike, GradNormExplosion };
std::string_view to_string(Divergence d);

struct DivergenceVerdict {
  Divergence kind = Divergence::None;
  double z = 0;                 // (loss - mean) / deviation over the window; 0 before min_history
  double grad_ratio = 0;        // grad norm / the window's median; 0 before min_history
  double mean_loss = 0;         // over the window
  double median_grad_norm = 0;  // over the window
  bool diverged() const { return kind != Divergence::None; }
};

class DivergenceDetector {
 public:
  explicit DivergenceDetector(const JobConfig::Guard& options) : options_(options) {}

  // The verdict on one step; changes nothing.
  DivergenceVerdict judge(double loss, double grad_norm) const;
  // Adds a step judged healthy to the window (the oldest leaves once it is full).
  void accept(double loss, double grad_norm);
  void clear() { window_.clear(); }
  std::size_t history() const { return window_.size(); }

 private:
  struct Seen {
    double loss, grad_norm;
  };
  JobConfig::Guard options_;
  std::deque<Seen> window_;
};

}  // namespace meridian
