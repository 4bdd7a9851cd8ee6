#include "core/optim/schedule.hpp"

#include <algorithm>
#include <cmath>

namespace meridian {
namespace {

double shape_at(DecayShape shape, double progress) {
  switch (shape) {
    case DecayShape::Linear:
      return 1.0 - progress;
    case DecayShape::OneMinusSqrt:
      return 1.0 - std::sqrt(progress);
    case DecayShape::Cosine:
      return 0.5 * (1.0 + std::cos(M_PI * progress));
  }
  return 1.0 - progress;
}

// From the peak at step `from` to the floor at the last step.
double decayed(const LrSchedule& s, DecayShape shape, std::int64_t from, std::int64_t step) {
  const std::int64_t span = std::max<std::int64_t>(1, s.total_steps - 1 - from);
  const double progress = std::clamp(static_cast<double>(step - from) / static_cast<double>(span), 0.0, 1.0);
  const double floor = s.lr * s.min_lr_ratio;
  return floor + (s.lr - floor) * shape_at(shape, progress);
}

}  // namespace

std::int64_t cooldown_steps(const LrSchedule& s) {
  return std::max<std::int64_t>(1, std::llround(s.decay_fraction * static_cast<double>(s.total_steps)));
}

double lr_at(const LrSchedule& s, std::int64_t step) {
  if (step < s.warmup_steps) return s.lr * static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps);
  switch (s.kind) {
    case ScheduleKind::Constant:
      return s.lr;
    case ScheduleKind::Cosine:
      return decayed(s, DecayShape::Cosine, s.warmup_steps, step);
    case ScheduleKind::Linear:
      return decayed(s, DecayShape::Linear, s.warmup_steps, step);
    case ScheduleKind::Wsd: {
      // Stable: exactly the peak (floor + (peak - floor) need not round back to it).
      const std::int64_t from = std::max(s.warmup_steps, s.total_steps - 1 - cooldown_steps(s));
      return step <= from ? s.lr : decayed(s, s.decay_shape, from, step);
    }
  }
  return s.lr;
}

}  // namespace meridian
