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

}  // namespace meridian
