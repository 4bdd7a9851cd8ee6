#pragma once
// How a site reaches the control plane: the gate holds it and hands it only to calls made through
// run(), so none bypasses what follows. A failure (unreachable, no majority here, no answer) is
// noted, said once as an event, and calls are refused until `retry` has passed, so the site
// trains on meanwhile; it cannot commit then, so it cannot fork.
// And which of the job's ranges a look must read: every range without a watch, while the control
// plane is down, right after it comes back and every `full_read` (a stream that stalled through a
// partition may have missed changes its probe has not caught yet); otherwise those the watch saw
// change, and the commits after this site wrote one.
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "crosssite/control/control_plane.hpp"
#include "crosssite/control/change_feed.hpp"
#include "crosssite/round/cross_site_types.hpp"

namespace meridian {

class ControlGate {
 public:
  // `poll`: between looks; `watch`: null for none (every look reads every range).
  ControlGate(ControlPlane& plane, std::function<double()> clock, std::chrono::milliseconds poll,
              std::chrono::milliseconds retry, std::chrono::milliseconds full_read, std::unique_ptr<ChangeFeed> watch);

  bool run(const std::function<void(ControlPlane&)>& call, CrossSiteEvents& events);
  bool down() const { return down_; }
  const std::string& error() const { return error_; }  // what the latest failure said

  struct Reads {
    bool members = true, announcements = true, commits = true;
  };
  Reads reads_due();
  // When the next look is due; a look taken now puts the next one a poll later.
  double next_look() const { return next_look_; }
  bool look_due() {
    if (clock_() < next_look_) return false;
    next_look_ = clock_() + poll_s_;
    return true;
  }
  // This site proposed: the next look is now, and reads the commits.
  void look_now() {
    next_look_ = clock_();
    read_back_ = true;
  }

 private:
  ControlPlane& plane_;
  std::function<double()> clock_;
  double poll_s_, retry_s_, full_read_s_;
  std::unique_ptr<ChangeFeed> watch_;
  std::array<std::uint64_t, 3> watch_seen_{};  // watch_->changes(area) when each range was last read
  double next_look_ = 0, next_full_read_ = 0, retry_at_ = 0;
  bool down_ = false, read_back_ = true;
  std::string error_;
};

}  // namespace meridian
