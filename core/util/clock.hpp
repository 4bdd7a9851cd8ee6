#pragma once
// Time as the protocol reads it: seconds on a monotonic clock. Code that decides on time takes a
// clock (a `std::function<double()>` made from one of these), never reads the system's, so the
// protocol simulator can run it on virtual time.
#include <chrono>

namespace meridian {

// The process's monotonic clock.
inline double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A duration in the protocol's unit of time.
inline double seconds_of(std::chrono::milliseconds d) { return static_cast<double>(d.count()) / 1000.0; }

// Virtual time that moves only when told: one clock for a whole simulated world.
class ManualClock {
 public:
  explicit ManualClock(double start = 0) : now_(start) {}
  double now() const { return now_; }
  void advance(double seconds) { now_ += seconds > 0 ? seconds : 0; }
  void advance_to(double t) { now_ = t > now_ ? t : now_; }

 private:
  double now_;
};

}  // namespace meridian
