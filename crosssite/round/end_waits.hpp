#pragma once
// The two waits that end a site's part in the job (CrossSite::finished), each bounded so that no
// peer, gone or stuck, holds a site for good:
//  - alone, the next version's deltas missing: the peers sent their last deltas as they announced
//    them, perhaps moments before they left, and those may still be on their way;
//  - done, while live peers have not ended: one of them may still be behind (it came back from a
//    partition just as the job ended) and needs a live site to take the last versions or a state
//    from. Without this wait the others left first and it ended on an older version.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "crosssite/round/records.hpp"

namespace meridian {

class EndWaits {
 public:
  static constexpr double kInFlightGrace_s = 5;
  // Long enough for a site behind to notice, ask (a silent source is replaced after a second) and
  // take a peer's state over a slow link; only a peer that keeps its lease and never ends costs it.
  static constexpr double kPeersEnd_s = 60;

  // True while a site left alone still waits for the next version's deltas (from its first call).
  bool in_flight(double now);

  struct Peers {
    std::vector<std::string> waited_for;  // live peers that have not ended yet
    bool gave_up = false;                 // kPeersEnd_s passed: the site ends without them
  };
  // The live peers (`members`, this site `self` among them) this site, done, still waits for.
  Peers peers(double now, const std::map<std::string, MemberRecord>& members, const std::string& self);

  // Called at every look for the job's end: true once the control plane has been out of reach at
  // each look for `bound_s` (0: never), counted from the first look that found it so since it last
  // answered. A site that trained on alone through a long partition still gets the whole bound
  // once its steps are done: the peers may be training yet, and the cut may heal.
  bool cut_off(double now, bool reachable, double bound_s);
  // cut_off() said so: the site ends without the job's last versions.
  bool ended_cut_off() const { return ended_cut_off_; }

 private:
  std::optional<double> orphaned_since_, done_since_, unreachable_since_;
  bool ended_cut_off_ = false;
};

}  // namespace meridian
