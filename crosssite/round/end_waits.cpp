#include "crosssite/round/end_waits.hpp"

namespace meridian {

bool EndWaits::in_flight(double now) {
  if (!orphaned_since_) orphaned_since_ = now;
  return now - *orphaned_since_ < kInFlightGrace_s;
}

EndWaits::Peers EndWaits::peers(double now, const std::map<std::string, MemberRecord>& members,
                                const std::string& self) {
  if (!done_since_) done_since_ = now;
  Peers out;
  for (const auto& [site, m] : members)
    if (site != self && m.ended < 0) out.waited_for.push_back(site);
  out.gave_up = !out.waited_for.empty() && now - *done_since_ >= kPeersEnd_s;
  return out;
}

bool EndWaits::cut_off(double now, bool reachable, double bound_s) {
  if (reachable) {
    unreachable_since_.reset();
    return false;
  }
  if (!unreachable_since_) unreachable_since_ = now;
  if (bound_s > 0 && now - *unreachable_since_ >= bound_s) ended_cut_off_ = true;
  return ended_cut_off_;
}

}  // namespace meridian
