#pragma once
// Step 4 of a round (DESIGN.md): when is version v+1 due, and which deltas does it merge? A pure
// function of what the control plane shows, what this site holds, and the time, so every site
// decides alike and tests need no clock.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sync/outer/delta_mean.hpp"
#include "sync/round/records.hpp"

namespace meridian {

struct CommitRuleOptions {
  int quorum = 0;  // sites whose deltas a commit waits for; 0 = every live site
  StalenessOptions staleness;
};

using SiteRound = std::pair<std::string, std::int64_t>;

struct CommitView {
  double now = 0;                               // seconds, on the caller's clock
  std::int64_t version = 0;                     // the newest committed version
  std::vector<std::string> live_sites;          // holding a membership key now
  std::map<std::string, std::int64_t> applied;  // per site, the newest round a commit merged
  std::vector<DeltaAnnouncement> announced;     // every announcement seen, in any order
  std::set<SiteRound> held;                     // deltas here, matching their checksum, screened fine
  std::set<SiteRound> refused;                  // deltas this site will never merge (bad values)
  // When the first delta that could go into version + 1 was held here, and how long after it the
  // rest may take (commit_deadline.hpp); no deadline: wait for the quorum only.
  std::optional<double> first_held_at;
  std::optional<double> deadline_s;
};

// What each live site offers to the next commit: its oldest round not merged yet whose base is
// within max_staleness (older ones are skipped for good, since they would weigh 0) and that was
// not refused. A dead site's deltas wait for its return: their bytes may be nowhere. By site.
std::map<std::string, DeltaAnnouncement> open_offers(const CommitView& view, const CommitRuleOptions& options);

// The entries of commit version+1, sorted by site, or nullopt while it is not due.
//
// Each live site offers at most one delta (open_offers). Due when every live site's offer is held here (quorum 0), or at least `quorum` are, or the deadline passed with
// at least one held; the commit lists the held offers only, so a site whose delta is late (a
// straggler, a partition) is merged in a later version with its staleness weight.
std::optional<std::vector<CommitEntry>> decide_commit(const CommitView& view, const CommitRuleOptions& options);

}  // namespace meridian
