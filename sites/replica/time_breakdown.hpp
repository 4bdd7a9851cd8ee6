#pragma once
// Where a replica's wall time goes, for summary.json: every second from the start of the replica
// (before its data is loaded) to its summary falls in exactly one part, the parts not timed
// directly in `other`, so the compute utilization explains itself.
//
// Two utilizations, both time in inner steps over a wall time:
//  * whole process: over all of it (start-up, evaluations and the final checkpoint included);
//  * training phase: over the time from the first inner step to the end of the job's training,
//    without the evaluations (a production job runs them on other hardware) -- waits on other
//    sites, round ends, polls, logging, recoveries and everything else untimed still count.
// Times are passed in (seconds on one monotonic clock); nothing here reads a clock.
#include <array>
#include <cstddef>
#include <optional>

#include <nlohmann/json.hpp>

namespace meridian {

class TimeBreakdown {
 public:
  enum class Part : std::size_t {
    Steps,          // trainer.step(): the compute that utilization counts
    Eval,           // validation passes, mid-run and final
    CrossSiteWait,  // waiting on other sites mid-run: at a round end, for a version (backlog)
    EndWait,        // at the job's end, until every site's last delta is merged
    RoundEnd,       // encoding and sending a round's delta, outside the waits and applies
    Apply,          // applying a version: preview, hash check, commit, rebase
    Poll,           // the per-step look for a version, when none was applied
    Log,            // metric lines and the figures published for the metrics endpoint
    Checkpoint,     // checkpoints during training
    Sdc,            // comparing the weights of the site's replicas (silent data corruption)
    Rejoin,         // regrouping after a failed collective (after training began)
    Finish,         // the final checkpoint and summary, after training
    kCount
  };

  explicit TimeBreakdown(double started) : started_(started) {}

  void add(Part part, double seconds) { seconds_[static_cast<std::size_t>(part)] += seconds; }
  // The first inner step starts now; everything before it is start-up. Later calls do nothing.
  void training_begins(double now) {
    if (!training_began_) training_began_ = now;
  }
  bool training_began() const { return training_began_.has_value(); }
  double seconds(Part part) const { return seconds_[static_cast<std::size_t>(part)]; }
  double started() const { return started_; }

  // {"wall_s", "compute_utilization", "training_utilization", "time_s": {part: seconds,
  // "startup", "other"}}; the parts and start-up sum to wall_s, `other` being what is left.
  nlohmann::json summary(double now) const;

 private:
  double started_;
  std::optional<double> training_began_;
  std::array<double, static_cast<std::size_t>(Part::kCount)> seconds_{};
};

}  // namespace meridian
