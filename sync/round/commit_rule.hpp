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
  // Streaming DiLoCo: a version merges deltas of one fragment, and a delta's staleness counts (an
  // estimate of) the commits of its own fragment since its base (fragments.hpp). 1: DiLoCo.
  int fragments = 1;
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
  // Streaming: the fragment after the newest version's, (its fragment + 1) mod P, the one every
  // site's next exchange is for when they go in step; -1 when the newest version's is not known.
  int next_fragment = 0;
};

// What each live site offers to the next commit: its oldest round not merged yet whose base is
// within max_staleness (older ones are skipped for good, since they would weigh 0), whose fragment
// exists, and that was not refused. A dead site's deltas wait for its return: their bytes may be
// nowhere. By site. A site's rounds merge in order, also across fragments: a streaming round the
// next version cannot take (another fragment) waits for its fragment's turn, and so does every
// later round of its site. That keeps "the newest round merged" per site enough to know what is
// in (no delta twice, late copies recognised, a commit's `merged`), at the price of a round cut
// by the deadline waiting P - 1 versions more.
std::map<std::string, DeltaAnnouncement> open_offers(const CommitView& view, const CommitRuleOptions& options);

// The staleness of a delta of `fragment` based on `base_version`, merged on top of `version`.
std::int64_t staleness_of(std::int64_t version, std::int64_t base_version, const CommitRuleOptions& options);

// Streaming: the fragment version+1 changes: next_fragment when any live site offers it (or may
// still announce it), else the fragment of the offer with the oldest base (then the lowest
// fragment), so that whatever is offered is merged in the end and a site whose rounds fell out of
// turn (one was cut by the deadline) is merged alone rather than never. 0 with one fragment.
int commit_fragment(const CommitView& view, const std::map<std::string, DeltaAnnouncement>& offers);

// The entries of commit version+1, sorted by site, or nullopt while it is not due. Only offers of
// commit_fragment count, and a live site whose open offer is of another fragment is not waited
// for: in-order, it cannot take part in this version.
//
// Each live site offers at most one delta (open_offers). Due when every live site's offer is held here (quorum 0), or at least `quorum` are, or the deadline passed with
// at least one held; the commit lists the held offers only, so a site whose delta is late (a
// straggler, a partition) is merged in a later version with its staleness weight.
std::optional<std::vector<CommitEntry>> decide_commit(const CommitView& view, const CommitRuleOptions& options);

}  // namespace meridian
