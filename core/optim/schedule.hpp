#pragma once
// Learning-rate schedules as pure functions of the step, so resume needs no schedule state.
#include <cstdint>
#include <optional>
#include <string_view>

namespace meridian {

enum class ScheduleKind { Cosine, Linear, Constant };
std::optional<ScheduleKind> parse_schedule(std::string_view name);  // "cosine" | "linear" | "constant"

struct LrSchedule {
  ScheduleKind kind = ScheduleKind::Cosine;
  double lr = 1e-3;            // peak, reached at the end of warmup
  double min_lr_ratio = 0.1;   // final lr = lr * min_lr_ratio (cosine and linear)
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 1;
};

// lr for 0-based step `step`: linear warmup from lr/warmup_steps, then decay to the floor at total_steps - 1.
double lr_at(const LrSchedule& s, std::int64_t step);

}  // namespace meridian
