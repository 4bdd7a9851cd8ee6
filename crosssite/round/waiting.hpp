#pragma once
// What a site's cross-site exchange waits for after a look: a kind a caller can branch on and a
// figure (a version, a step), with the sentence `meridianctl status` and the logs show.
#include <cstdint>
#include <string>

namespace meridian {

struct Waiting {
  enum class What {
    Nothing,           // nothing yet looked at
    ControlPlane,      // unreachable: detail says how it failed
    Join,              // sites to join: detail names them
    CommitDeltas,      // the deltas commit `number` lists, not all here yet
    PausedProposal,    // the outer exchange is paused here: a version another site proposes
    DeltasForVersion,  // enough deltas for version `number`: detail counts them
    PeerState,         // a peer's state of version `number` or newer
    FinalRound,        // the final round of the site in detail
    Version,           // version `number`, committed and not held here
    HeldVersion,       // version `number`, whose deltas are here
    OnTheirWay,        // version `number`'s deltas, which may be on their way
    LastDeltas,        // the last deltas to be merged
    PeersToEnd,        // the others to end: detail names them
    Gradients,         // gradients of step `number` from the site in detail
    SiteHash,          // this site's replicas to hash their parts of its proposal of version `number`
    CopyDiverged,      // a peer's state: this site's copy of version `number` hashes otherwise than its record says
    Contradicted,      // a state newer than version `number`, whose record another site vouches against (detail)
  };
  What what = What::Nothing;
  std::int64_t number = 0;
  std::string detail;

  std::string describe() const;
  bool operator==(const Waiting&) const = default;
};

}  // namespace meridian
