#include "crosssite/round/control_gate.hpp"

#include "core/util/clock.hpp"
#include "core/util/error.hpp"

namespace meridian {

ControlGate::ControlGate(ControlPlane& plane, std::function<double()> clock, std::chrono::milliseconds poll,
                         std::chrono::milliseconds retry, std::chrono::milliseconds full_read,
                         std::unique_ptr<ChangeFeed> watch)
    : plane_(plane),
      clock_(std::move(clock)),
      poll_s_(seconds_of(poll)),
      retry_s_(seconds_of(retry)),
      full_read_s_(seconds_of(full_read)),
      watch_(std::move(watch)) {}

bool ControlGate::run(const std::function<void(ControlPlane&)>& call, CrossSiteEvents& events) {
  if (clock_() < retry_at_) return false;
  try {
    call(plane_);
  } catch (const Error& e) {
    retry_at_ = clock_() + retry_s_;
    error_ = e.what();
    if (!down_) events.push_back({"control_unreachable", "", 0, e.what()});
    down_ = true;
    return false;
  }
  if (down_) {
    events.push_back({"control_restored", "", 0, ""});
    next_full_read_ = 0;  // the next look reads everything
  }
  down_ = false;
  return true;
}

ControlGate::Reads ControlGate::reads_due() {
  const bool all = !watch_ || !watch_->watching() || down_ || clock_() >= next_full_read_;
  if (all) next_full_read_ = clock_() + full_read_s_;
  std::array<bool, 3> due{};
  for (std::size_t i = 0; i < due.size(); ++i) {
    // Taken before the read: a change that lands while it runs moves the count again.
    const auto now = watch_ ? watch_->changes(i) : 0;
    due[i] = all || now != watch_seen_[i];
    watch_seen_[i] = now;
  }
  Reads reads{due[0], due[1], due[2] || read_back_};
  read_back_ = false;
  return reads;
}

}  // namespace meridian
