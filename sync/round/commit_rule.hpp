#pragma once
// Step 4 of a round (DESIGN.md): when is version v+1 due, and which deltas does it merge? A pure
// function of what the control plane shows, so every site decides alike and tests need no clock.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sync/outer/delta_mean.hpp"
#include "sync/round/records.hpp"

namespace meridian {

struct CommitRuleOptions {
  int quorum = 0;  // sites whose deltas a commit waits for; 0 = every live site
  StalenessOptions staleness;
};

struct CommitView {
  std::int64_t version = 0;                     // the newest committed version
  std::vector<std::string> live_sites;          // holding a membership key now
  std::map<std::string, std::int64_t> applied;  // per site, the newest round a commit merged
  std::vector<DeltaAnnouncement> announced;     // every announcement seen, in any order
};

// The entries of commit version+1, sorted by site, or nullopt while it is not due. Each site
// contributes at most one delta: its oldest round not merged yet whose base is within
// max_staleness (older ones are skipped for good, since they would weigh 0). Due when every live
// site has one (quorum 0) or at least `quorum` sites do.
std::optional<std::vector<CommitEntry>> decide_commit(const CommitView& view, const CommitRuleOptions& options);

}  // namespace meridian
