#include "core/optim/schedule.hpp"

#include <algorithm>
#include <cmath>

namespace meridian {

std::optional<ScheduleKind> parse_schedule(std::string_view name) {
  if (name == "cosine") return ScheduleKind::Cosine;
  if (name == "linear") return ScheduleKind::Linear;
  if (name == "constant") return ScheduleKind::Constant;
  return std::nullopt;
}

double lr_at(const LrSchedule& s, std::int64_t step) {
  if (step < s.warmup_steps) return s.lr * static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps);
  if (s.kind == ScheduleKind::Constant) return s.lr;
  const std::int64_t decay_steps = std::max<std::int64_t>(1, s.total_steps - 1 - s.warmup_steps);
  const double progress = std::clamp(static_cast<double>(step - s.warmup_steps) / decay_steps, 0.0, 1.0);
  const double floor = s.lr * s.min_lr_ratio;
  const double shape = s.kind == ScheduleKind::Cosine ? 0.5 * (1.0 + std::cos(M_PI * progress)) : 1.0 - progress;
  return floor + (s.lr - floor) * shape;
}

}  // namespace meridian
