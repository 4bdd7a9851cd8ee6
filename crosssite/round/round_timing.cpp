#include "crosssite/round/round_timing.hpp"

#include <algorithm>

namespace meridian {

void RoundTiming::submitted(double now) {
  if (last_submit_at_ > 0) {
    round_seconds_.push_back(now - last_submit_at_);
    if (round_seconds_.size() > 8) round_seconds_.erase(round_seconds_.begin());
  }
  last_submit_at_ = now;
}

void RoundTiming::held(std::int64_t version, const DeltaKey& key, double now) {
  if (open_version_ != version) {
    open_version_ = version;
    first_held_at_.reset();
    seen_held_.clear();
  }
  if (!seen_held_.insert(key).second) return;
  // How long after the version's first delta each later one arrives: what the deadline learns from.
  if (first_held_at_) arrivals_.record(now - *first_held_at_);
  else first_held_at_ = now;
}

std::optional<double> RoundTiming::deadline_s(DeadlineOptions deadline, int fragments) const {
  // Streaming: half a turn of P fragments (H steps, as DiLoCo's round), not half an exchange (H / P
  // steps, short against a shared machine's jitter): a round cut from its version goes into the
  // next one as an extra outer step of its fragment, momentum and all.
  if (!round_seconds_.empty()) {
    auto sorted = round_seconds_;
    std::sort(sorted.begin(), sorted.end());
    deadline.floor_s = std::max(deadline.floor_s, 0.5 * fragments * sorted[sorted.size() / 2]);
    deadline.ceiling_s = std::max(deadline.ceiling_s, deadline.floor_s);
  }
  return arrivals_.deadline_s(deadline);
}

}  // namespace meridian
