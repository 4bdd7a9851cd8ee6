#pragma once
// When a site's rounds end and when each version's deltas arrive here: what the adaptive commit
// deadline (commit_deadline.hpp) learns from, and how long a deadline may cut a version.
#include <cstdint>
#include <optional>
#include <set>
#include <vector>

#include "crosssite/round/commit_deadline.hpp"
#include "crosssite/round/cross_site_types.hpp"

namespace meridian {

class RoundTiming {
 public:
  void submitted(double now);  // this site ended a round
  // Deltas usable for `version` are here (once per delta and version): the first starts the
  // version's clock, each later one's lag is recorded.
  void held(std::int64_t version, const DeltaKey& key, double now);
  std::optional<double> first_held_at() const { return first_held_at_; }
  // The deadline for the open version. Never shorter than half a round (`fragments` exchanges of
  // a turn, for streaming): a delta that late is jitter on a shared machine or link, not a
  // straggler, and waiting for it costs an overlapping site nothing.
  std::optional<double> deadline_s(DeadlineOptions options, int fragments) const;

 private:
  ArrivalHistory arrivals_;
  double last_submit_at_ = 0;
  std::vector<double> round_seconds_;  // between this site's latest submits: a round's length
  std::int64_t open_version_ = -1;     // the version the arrival times below are for
  std::optional<double> first_held_at_;
  std::set<DeltaKey> seen_held_;
};

}  // namespace meridian
