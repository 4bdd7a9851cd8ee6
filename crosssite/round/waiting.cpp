#include "crosssite/round/waiting.hpp"

namespace meridian {

std::string Waiting::describe() const {
  const std::string n = std::to_string(number);
  switch (what) {
    case What::Nothing: return "nothing";
    case What::ControlPlane: return "the control plane: " + detail;
    case What::Join: return "sites to join:" + detail;
    case What::CommitDeltas: return "the deltas of commit " + n;
    case What::PausedProposal: return "a version another site proposes (the outer exchange is paused here)";
    case What::DeltasForVersion: return "deltas for version " + n + " (" + detail + ")";
    case What::PeerState: return "a peer's state of version " + n + " or newer";
    case What::FinalRound: return "the final round of " + detail;
    case What::Version: return "version " + n;
    case What::HeldVersion: return "version " + n + ", whose deltas are here";
    case What::OnTheirWay: return "version " + n + "'s deltas, which may be on their way";
    case What::LastDeltas: return "the last deltas to be merged";
    case What::PeersToEnd: return "the others to end (one behind takes the last versions from here):" + detail;
    case What::Gradients: return "gradients of step " + n + " from " + detail;
    case What::SiteHash: return "this site's replicas to hash their parts of its proposal of version " + n;
    case What::CopyDiverged:
      return "a peer's state: this site's copy of version " + n + " is not its record's (" + detail + ")";
    case What::Contradicted:
      return "a peer's state newer than version " + n + ", whose record is not the one vouched for (" + detail + ")";
  }
  return "?";
}

}  // namespace meridian
