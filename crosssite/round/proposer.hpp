#pragma once
// This site's part in step 4 of a round (DESIGN.md): proposing version v+1 once the commit rule
// says it is due, and what each version applies here. A proposal lists the deltas it merges, the
// rounds merged per site, and the hash of the state it leads to (so every site checks it applied
// the same), and is claimed by compare-and-swap in the commit log: whoever proposes, one wins.
// When this site's own proposal wins, its mean was computed for the hash already, and handing the
// version out takes no second pass over the deltas. The proposer also times the site's rounds and
// the deltas' arrivals, which set the adaptive deadline (round_timing.hpp).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "crosssite/control/control_plane.hpp"
#include "crosssite/outer/outer_state.hpp"
#include "crosssite/round/commit_deadline.hpp"
#include "crosssite/round/commit_log.hpp"
#include "crosssite/round/commit_rule.hpp"
#include "crosssite/round/cross_site_types.hpp"
#include "crosssite/round/delta_store.hpp"
#include "crosssite/round/held_copy.hpp"
#include "crosssite/round/records.hpp"
#include "crosssite/round/round_timing.hpp"
#include "crosssite/round/waiting.hpp"

namespace meridian {

// What a version applies on a site.
struct VersionCommit {
  CommitRecord record;
  // Per fragment the entries cover (ascending; {0} for DiLoCo), the weighted mean of its deltas,
  // in the record's order: the fragments' values one after the other.
  std::vector<float> mean_delta;
  std::vector<std::byte> snapshot;  // non-empty: adopt this peer state (version record.number) instead
  std::vector<int> fragments;
  // This site's own proposal won: what it previewed to hash the proposal, so that the version is
  // not computed a second time (one model copy held from the proposal to its apply).
  std::optional<OuterState::Outcome> outcome{};
  // This site's own proposal won (a sharded site's replicas kept their parts' previews of it).
  bool proposed_here = false;
  // A sharded state's: the deltas, still encoded, instead of mean_delta (DeltaStore::Means).
  std::optional<MergedDeltas> merged{};
};

// A sharded site's proposal, for its replicas to preview their parts of and hash together.
struct ProposalPreview {
  std::int64_t version = 0;
  std::vector<int> fragments;
  std::vector<float> mean;
  std::optional<MergedDeltas> merged;
};

struct ProposerOptions {
  std::string site;
  CommitRuleOptions rule;
  DeadlineOptions deadline;
};

class Proposer {
 public:
  // `log`, `store` and `counts` are the site's own (CrossSite's parts), used from the calls below.
  Proposer(ProposerOptions options, CommitLog& log, DeltaStore& store, CrossSiteTraffic& counts);

  // This site ended a round: how long rounds take bounds the deadline from below.
  void submitted(double now) { timing_.submitted(now); }
  // `key`'s delta is here, verified and screened fine: it may go into version view.version + 1,
  // and its arrival is timed.
  void held(CommitView& view, const DeltaKey& key);
  // Claims version view.version + 1 in `plane` when the commit rule says it is due on `view` (its
  // `held` filled by held()); `merged`: per site, the newest round merged so far, which the record
  // carries on. What it waits for when it proposed nothing. A sharded state cannot hash a
  // proposal alone: it is kept for take_preview() and claimed by claim_previewed() with the hash
  // of the parts. `copy`: what says whether a whole state is still the version it holds; one
  // that is not proposes nothing (CopyDiverged, its detail HeldCopy::damage's): the proposal would
  // carry the damage to every site.
  std::optional<Waiting> propose(CommitView view, const OuterState& state,
                                 const std::map<std::string, std::int64_t>& merged, ControlPlane& plane,
                                 CrossSiteEvents& events, const HeldCopy* copy = nullptr);
  std::optional<ProposalPreview> take_preview();
  bool preview_pending() const { return previewing_ && !preview_taken_; }
  void claim_previewed(std::uint64_t hash, ControlPlane& plane, CrossSiteEvents& events);
  // What `record` (the next version, every delta verified here) applies: this site's own
  // proposal's mean when that is what won, else computed.
  VersionCommit commit_of(const CommitRecord& record, const OuterState& state);
  // The site applied or adopted a version: its proposal is of no use any more.
  void forget() {
    proposed_.reset();
    previewing_.reset();
  }

 private:
  // A proposal and its means, before it is claimed.
  struct Pending {
    CommitRecord proposal;
    DeltaStore::Means means;
    bool short_of_sites = false;  // fewer sites than the round awaits: a commit by the deadline
  };
  DeltaStore::Means mean_of(const CommitRecord& record, const OuterState& state);
  void claim(Pending pending, std::optional<OuterState::Outcome> outcome, ControlPlane& plane, CrossSiteEvents& events);

  ProposerOptions options_;
  CommitLog& log_;
  DeltaStore& store_;
  CrossSiteTraffic& counts_;
  RoundTiming timing_;
  std::optional<VersionCommit> proposed_;  // this site's latest proposal and its means
  std::optional<Pending> previewing_;      // a sharded site's, while its replicas preview it
  bool preview_taken_ = false;
};

}  // namespace meridian
