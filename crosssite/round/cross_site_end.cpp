// CrossSite at the job's end (cross_site.hpp): when this site holds the job's last version and
// every other site has ended, leaving, and whether the whole job is over.
#include <algorithm>

#include "crosssite/round/cross_site.hpp"

namespace meridian {

bool CrossSite::finished(const OuterState& state) {
  if (merged_all(state) && peers_ended(state)) return true;
  if (!ends_.cut_off(clock_(), !gate_.down(), options_.end_unreachable_s)) return false;
  events_.push_back({"ended_cut_off", "", state.version(),
                     "the control plane out of reach for " +
                         std::to_string(static_cast<long long>(options_.end_unreachable_s)) + " s at the job's end (" +
                         gate_.error() + "): ends on version " + std::to_string(state.version()) +
                         ", which may not be the job's last"});
  return true;
}

bool CrossSite::merged_all(const OuterState& state) {
  // Called at every look of the job's end: it reads only what changed since (or everything, as due).
  const ControlGate::Reads reads = gate_.reads_due();
  if (!announce_pending() || !control([&](ControlPlane& plane) {
        if (reads.members) refresh_members();
        if (reads.announcements) read_announcements(plane);
        if (reads.commits) log_.read(plane, events_);
      }))
    return false;
  const auto& members = membership_.members();
  for (const auto& [site, member] : members)
    if (!book_.finished(site)) {
      waiting_ = {Waiting::What::FinalRound, 0, site};
      return false;
    }
  if (log_.newest() > state.version()) {
    const bool peer =
        std::any_of(members.begin(), members.end(), [&](const auto& m) { return m.first != options_.site; });
    if (peer) {
      waiting_ = {Waiting::What::Version, log_.newest(), ""};
      return false;
    }
    // Everyone else has finished and left. A site a look behind them may hold the next version's
    // deltas all the same (they were sent to it before the commit): it applies it on its own.
    take_in_received();
    if (const CommitRecord* next = log_.find(state.version() + 1); next && holds_deltas_of(*next)) {
      waiting_ = {Waiting::What::HeldVersion, next->number, ""};
      return false;
    }
    // The peers sent their last deltas as they announced them, perhaps moments before they left:
    // those may still be on their way (a site that adopted a peer's state for the second-to-last
    // version looks for the last one's deltas right after they were sent).
    if (ends_.in_flight(clock_())) {
      waiting_ = {Waiting::What::OnTheirWay, state.version() + 1, ""};
      return false;
    }
    // Nobody holds the newer versions' deltas or state any more. This site ends on what it has
    // rather than wait forever, and says so.
    events_.push_back({"catch_up_impossible", "", log_.newest(),
                       "no live site left to take versions after " + std::to_string(state.version()) + " from"});
    return true;
  }
  // Every live site's last announcement is in, so the offers below are all there will be: none
  // left means no site can propose another version.
  if (!open_offers(control_view(state), options_.rule).empty()) {
    waiting_ = {Waiting::What::LastDeltas, 0, ""};
    return false;
  }
  return true;
}

bool CrossSite::peers_ended(const OuterState& state) {
  // Its record says so at once; merged_all() read the others' just before, and reads them again at
  // the next look, so two sites that end together each see the other's.
  membership_.set_ended(state.version());
  if (!control([&](ControlPlane&) { membership_.maintain(); })) return false;
  const auto peers = ends_.peers(clock_(), membership_.members(), options_.site);
  if (peers.waited_for.empty()) return true;
  std::string names;
  for (const auto& site : peers.waited_for) names += " " + site;
  if (peers.gave_up) {
    events_.push_back({"peers_not_ended", "", state.version(),
                       "ends without waiting longer for" + names + ", which may not hold version " +
                           std::to_string(state.version())});
    return true;
  }
  waiting_ = {Waiting::What::PeersToEnd, 0, names};
  return false;
}

void CrossSite::leave() {
  const std::int64_t lease = membership_.leave();
  if (lease != 0)
    control([&](ControlPlane& plane) { plane.revoke_lease(lease); });  // else the lease lapses after its TTL
}

bool CrossSite::job_over() {
  if (!control([&](ControlPlane& plane) {
        refresh_members();
        read_announcements(plane);
      }))
    return false;
  return std::all_of(options_.sites.begin(), options_.sites.end(), [&](const std::string& site) {
    return site == options_.site || (book_.finished(site) && !membership_.member(site));
  });
}

}  // namespace meridian
