#include "sites/replica/time_breakdown.hpp"

#include <algorithm>

namespace meridian {
namespace {

constexpr const char* kNames[] = {"steps", "eval",       "cross_site_wait", "end_wait", "round_end", "apply",
                                  "poll",  "log",        "checkpoint",      "sdc",      "rejoin",    "finish"};
static_assert(std::size(kNames) == static_cast<std::size_t>(TimeBreakdown::Part::kCount));

}  // namespace

nlohmann::json TimeBreakdown::summary(double now) const {
  const double wall = now - started_;
  // A replica that never stepped spent all of its time starting.
  const double startup = (training_began_ ? *training_began_ : now) - started_;
  nlohmann::json parts = nlohmann::json::object();
  double timed = startup;
  for (std::size_t i = 0; i < seconds_.size(); ++i) {
    parts[kNames[i]] = seconds_[i];
    timed += seconds_[i];
  }
  parts["startup"] = startup;
  // Negative only by the rounding of the clock reads that bound the parts.
  parts["other"] = std::max(0.0, wall - timed);
  const double steps = seconds(Part::Steps);
  const double training = wall - startup - seconds(Part::Eval) - seconds(Part::Finish);
  return {{"wall_s", wall},
          {"compute_utilization", steps / std::max(1e-9, wall)},
          {"training_utilization", steps / std::max(1e-9, training)},
          {"time_s", std::move(parts)}};
}

}  // namespace meridian
