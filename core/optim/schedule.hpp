#pragma once
// Learning-rate schedules as pure functions of the step, so resume needs no schedule state.
#include <cstdint>

namespace meridian {

// Wsd: warmup, stable at the peak, then a cooldown over the last `decay_fraction` of the steps
// (Hägele et al. 2024: a cooldown of about a fifth matches cosine, and the stable phase's
// checkpoints continue without a schedule that already decayed).
enum class ScheduleKind { Cosine, Linear, Constant, Wsd };
// The cooldown's shape: 1 - p, 1 - sqrt(p) (the paper's best), or half a cosine, p in [0, 1].
enum class DecayShape { Linear, OneMinusSqrt, Cosine };

struct LrSchedule {
  ScheduleKind kind = ScheduleKind::Cosine;
  double lr = 1e-3;            // peak, reached at the end of warmup
  double min_lr_ratio = 0.1;   // final lr = lr * min_lr_ratio (all but constant)
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 1;
  double decay_fraction = 0.2;                        // wsd: the share of total_steps in the cooldown
  DecayShape decay_shape = DecayShape::OneMinusSqrt;  // wsd
};

// wsd: the steps below the peak at the end, at least 1: the last of them is at the floor.
std::int64_t cooldown_steps(const LrSchedule& s);

// lr for 0-based step `step`: linear warmup from lr/warmup_steps, then decay to the floor at total_steps - 1.
double lr_at(const LrSchedule& s, std::int64_t step);

}  // namespace meridian
