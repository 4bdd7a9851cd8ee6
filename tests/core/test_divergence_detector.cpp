// The divergence detector: non-finite steps at once, loss spikes by z-score over a moving window
// (with a floor on the deviation), gradient-norm explosions against the window's median, and no
// spike or explosion verdict before the window holds min_history steps; under fp16, a loss scale
// (from a real LossScaler) that falls near its floor or halves too often over the window.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "core/optim/loss_scale.hpp"
#include "core/train/divergence_detector.hpp"

using namespace meridian;

namespace {

JobConfig::Guard options() {
  JobConfig::Guard o;
  o.window = 10;
  o.min_history = 5;
  o.loss_z = 6.0;
  o.min_rel_std = 0.01;
  o.grad_norm_ratio = 10.0;
  return o;
}

// Losses alternating 3.0 +- 0.1 (mean 3.0, deviation 0.1), gradient norms 1.0.
DivergenceDetector noisy(int steps) {
  DivergenceDetector d(options());
  for (int i = 0; i < steps; ++i) d.accept(i % 2 ? 3.1 : 2.9, 1.0);
  return d;
}

}  // namespace

TEST_CASE("a non-finite loss or gradient norm diverges, even with no history") {
  const DivergenceDetector empty(options());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(empty.judge(nan, 1.0).kind == Divergence::NonFinite);
  CHECK(empty.judge(2.0, inf).kind == Divergence::NonFinite);
  CHECK(empty.judge(-inf, 1.0).kind == Divergence::NonFinite);
  CHECK(empty.judge(2.0, 1.0).kind == Divergence::None);
  CHECK(to_string(Divergence::NonFinite) == "nonfinite");
}

TEST_CASE("no spike or explosion is judged before min_history healthy steps") {
  const auto d = noisy(4);
  const auto v = d.judge(100.0, 1000.0);
  CHECK(v.kind == Divergence::None);
  CHECK(v.z == 0);
  CHECK(noisy(5).judge(100.0, 1.0).kind == Divergence::LossSpike);
}

TEST_CASE("a loss spike is a z-score over the window above loss_z") {
  const auto d = noisy(10);
  const auto just_below = d.judge(3.0 + 5.9 * 0.1, 1.0);
  CHECK(just_below.kind == Divergence::None);
  CHECK(just_below.z == doctest::Approx(5.9));
  CHECK(just_below.mean_loss == doctest::Approx(3.0));
  const auto spike = d.judge(3.0 + 6.1 * 0.1, 1.0);
  CHECK(spike.kind == Divergence::LossSpike);
  CHECK(spike.z == doctest::Approx(6.1));
  CHECK(d.judge(1.0, 1.0).kind == Divergence::None);  // a sudden drop is no divergence
}

TEST_CASE("on a plateau the deviation is floored at min_rel_std of the mean loss") {
  DivergenceDetector d(options());
  for (int i = 0; i < 10; ++i) d.accept(2.0, 1.0);  // no spread at all
  // floor = 0.01 x 2.0 = 0.02: +0.1 is z 5 (noise), +0.2 is z 10 (a spike)
  CHECK(d.judge(2.1, 1.0).kind == Divergence::None);
  CHECK(d.judge(2.1, 1.0).z == doctest::Approx(5.0));
  CHECK(d.judge(2.2, 1.0).kind == Divergence::LossSpike);
}

TEST_CASE("a gradient norm above grad_norm_ratio x the window's median is an explosion") {
  DivergenceDetector d(options());
  for (double g : {1.0, 2.0, 3.0, 100.0, 2.5, 1.5, 2.0}) d.accept(3.0 + 0.1 * g, g);  // one outlier: median 2
  const auto fine = d.judge(3.2, 19.0);
  CHECK(fine.kind == Divergence::None);
  CHECK(fine.median_grad_norm == doctest::Approx(2.0));
  CHECK(fine.grad_ratio == doctest::Approx(9.5));
  const auto exploded = d.judge(3.2, 21.0);
  CHECK(exploded.kind == Divergence::GradNormExplosion);
  CHECK(exploded.grad_ratio == doctest::Approx(10.5));
}

TEST_CASE("a gradient norm of 0 (an fp16 step skipped on overflow) is no sample of the window's median") {
  DivergenceDetector d = noisy(6);
  for (int i = 0; i < 4; ++i) d.accept(3.0, 0.0);  // skipped steps: the median stays 1.0, not 0
  const auto v = d.judge(3.0, 5.0);
  CHECK(v.median_grad_norm == 1.0);
  CHECK(v.grad_ratio == 5.0);
  CHECK(v.kind == Divergence::None);
  CHECK(d.judge(3.0, 11.0).kind == Divergence::GradNormExplosion);
}

TEST_CASE("the window keeps the last `window` healthy steps only") {
  DivergenceDetector d(options());
  for (int i = 0; i < 10; ++i) d.accept(10.0, 1.0);
  CHECK(d.judge(5.5, 1.0).z < 0);
  for (int i = 0; i < 10; ++i) d.accept(i % 2 ? 5.1 : 4.9, 1.0);  // the 10.0s have all left
  CHECK(d.history() == 10);
  CHECK(d.judge(5.0, 1.0).mean_loss == doctest::Approx(5.0));
  CHECK(d.judge(6.0, 1.0).kind == Divergence::LossSpike);
  d.clear();
  CHECK(d.history() == 0);
  CHECK(d.judge(60.0, 1.0).kind == Divergence::None);
}

namespace {

// An fp16 run's scaler: starts at 1024, floor 1, never regrows within these tests.
LossScaler scaler() {
  LossScaleOptions o;
  o.initial = 1024.0f;
  o.min_scale = 1.0f;
  o.growth_interval = 1000;
  return LossScaler(o);
}

LossScaleReading reading(const LossScaler& s) { return {s.scale(), 1.0}; }

}  // namespace

TEST_CASE("loss scale: a scale within loss_scale_floor_factor of its floor is a collapse, from the first step") {
  auto o = options();
  o.loss_scale_floor_factor = 4.0;
  o.loss_scale_halvings = 10;  // the falls alone would not do it here
  DivergenceDetector d(o);
  LossScaler s = scaler();
  // 1024 -> 512 -> ... -> 8: healthy; 4 = 4 x the floor: collapsing, with healthy loss and gradients.
  for (int i = 0; i < 7; ++i) {
    s.update(true);
    const auto v = d.judge(3.0, 1.0, reading(s));
    CAPTURE(s.scale());
    CHECK(v.kind == Divergence::None);
    CHECK(v.scale_halvings == i);  // the window holds the earlier falls, this step adds none (1024 never seen)
    d.accept(3.0, 1.0, reading(s));
  }
  CHECK(s.scale() == 8.0f);
  s.update(true);
  const auto collapsed = d.judge(3.0, 1.0, reading(s));
  CHECK(collapsed.kind == Divergence::LossScaleCollapse);
  CHECK(to_string(collapsed.kind) == "loss_scale_collapse");
  CHECK(DivergenceDetector(o).judge(3.0, 1.0, LossScaleReading{3.9, 1.0}).kind == Divergence::LossScaleCollapse);
  CHECK(DivergenceDetector(o).judge(3.0, 1.0).kind == Divergence::None);  // no scale: not an fp16 step
}

TEST_CASE("loss scale: loss_scale_halvings falls within the window are a collapse, spread wider they are not") {
  auto o = options();  // window 10
  o.loss_scale_floor_factor = 1.0;
  o.loss_scale_halvings = 3;
  // An overflow every 4th step: the third fall comes 8 steps after the first, inside the window.
  {
    DivergenceDetector d(o);
    LossScaler s = scaler();
    Divergence seen = Divergence::None;
    int step = 0;
    for (; step < 20 && seen == Divergence::None; ++step) {
      s.update(step % 4 == 3);
      const auto v = d.judge(3.0, 1.0, reading(s));
      seen = v.kind;
      if (seen == Divergence::None) d.accept(3.0, 1.0, reading(s));
    }
    CHECK(seen == Divergence::LossScaleCollapse);
    CHECK(step == 12);  // falls at steps 3, 7, 11; the first (1024 -> 512) is against a scale the window saw
    CHECK(s.scale() == 128.0f);
  }
  // An overflow every 6th step: at most two falls in any 11 steps (the window and this one).
  {
    DivergenceDetector d(o);
    LossScaler s = scaler();
    for (int step = 0; step < 54; ++step) {
      s.update(step % 6 == 5);
      const auto v = d.judge(3.0, 1.0, reading(s));
      CAPTURE(step);
      REQUIRE(v.kind == Divergence::None);
      CHECK(v.scale_halvings <= 2);
      d.accept(3.0, 1.0, reading(s));
    }
    CHECK(s.scale() == 2.0f);  // nine falls in all, 1024 / 2^9: one above the floor
  }
}
