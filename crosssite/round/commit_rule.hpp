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

#include "crosssite/outer/delta_mean.hpp"
#include "crosssite/round/records.hpp"

namespace meridian {

struct CommitRuleOptions {
  int quorum = 0;  // sites whose deltas a commit waits for; 0 = every live site
  StalenessOptions staleness;
  // Streaming DiLoCo: offers name one of this many fragments, and a delta's staleness counts (an
  // estimate of) the commits of its own fragment since its base (fragments.hpp). 1: DiLoCo.
  int fragments = 1;
  // A commit that lacks some sites' deltas (the deadline cut them, or the others finished) moves
  // the weights by its share of a full round's tokens, the missing sites counting as zero, as in
  // synchronous DiLoCo. false: by the mean of the deltas it has, however few.
  bool scale_partial = true;
};

using SiteRound = std::pair<std::string, std::int64_t>;

struct CommitView {
  double now = 0;                               // seconds, on the caller's clock
  std::int64_t version = 0;                     // the newest committed version
  std::vector<std::string> live_sites;          // holding a membership key now
  std::map<std::string, std::int64_t> applied;  // per site, the newest round a commit merged
  std::vector<DeltaAnnouncement> announced;     // every announcement seen, in any order
  std::set<SiteRound> held;                     // deltas here, matching their digest, screened fine
  std::set<SiteRound> refused;                  // deltas this site will never merge (bad values)
  // When the first delta that could go into version + 1 was held here, and how long after it the
  // rest may take (commit_deadline.hpp); no deadline: wait for the quorum only.
  std::optional<double> first_held_at;
  std::optional<double> deadline_s;
  // Streaming: the fragment whose turn version + 1 is (fragment_turn), and the sites that
  // announced their final round (they announce no more).
  int next_fragment = 0;
  std::set<std::string> finished;
  // Live sites whose outer exchange the operator paused: they announce nothing new, so a commit
  // waits only for what they announced before.
  std::set<std::string> paused;
  // Per site, the tokens one round of its newest announcement trained on (tokens / rounds).
  std::map<std::string, double> round_tokens;
};

// Whether `a` may still go into a version after view.version: not merged, not withdrawn, not
// refused, of a fragment of this job, with honest tokens and a base neither newer than the version
// (it cannot be honest) nor too stale (it would weigh nothing). open_rounds takes these of the live
// sites; a site's backlog (CrossSite::backlog) counts its own.
bool mergeable(const DeltaAnnouncement& a, const CommitView& view, const CommitRuleOptions& options);

// What each live site has open for the next commits: its rounds not merged yet whose base is
// within max_staleness (older ones are skipped for good, since they would weigh 0), whose
// fragment exists, and that were not refused, oldest first. A dead site's deltas wait for its
// return: their bytes may be nowhere. By site.
std::map<std::string, std::vector<DeltaAnnouncement>> open_rounds(const CommitView& view, const CommitRuleOptions& options);
// The oldest of each site's open rounds: what it offers next.
std::map<std::string, DeltaAnnouncement> open_offers(const CommitView& view, const CommitRuleOptions& options);

// The staleness of a delta based on `base_version`, merged on top of `version`.
std::int64_t staleness_of(std::int64_t version, std::int64_t base_version, const CommitRuleOptions& options);

// Streaming: whose turn version+1 is. next_fragment while some site has a round of it open or
// may still announce one; else the fragment of the oldest open round (oldest base, then lowest
// fragment), so whatever is announced is merged in the end. 0 with one fragment.
int commit_fragment(const CommitView& view, const std::map<std::string, std::vector<DeltaAnnouncement>>& rounds);

// How many sites a commit of `fragment` waits for when the quorum is "every live site": every
// live site, but a paused or finished one only while it has a round of that fragment open.
int awaited_sites(const CommitView& view, const std::map<std::string, std::vector<DeltaAnnouncement>>& rounds,
                  int fragment);

// Whether version+1 can never come from what is announced: no live site has a round open, and
// every live site that still announces (not paused, not finished) has announced a round on the
// newest version that was refused. Every site screens alike, so each one then waits for nothing
// but its peers, who wait for it: the sites must drop those rounds and train on. Pure.
bool every_offer_refused(const CommitView& view, const CommitRuleOptions& options);

// The entries of commit version+1, sorted by site, or nullopt while it is not due.
//
// Streaming: each site contributes its open rounds up to its first of commit_fragment's, in
// order (a site contributes nothing until it has one). The sites' exchanges take the fragments
// in the same turn, so that is usually one round of that fragment; a site whose round was cut
// from an earlier version by the deadline adds that round too (its own fragment, its own outer
// step), and is back in turn with the others from then on. With one fragment: the oldest round.
//
// Each live site offers at most one delta (open_offers). Due when every live site's offer is held here (quorum 0), or at least `quorum` are, or the deadline passed with
// at least one held; the commit lists the held offers only, so a site whose delta is late (a
// straggler, a partition) is merged in a later version with its staleness weight.
std::optional<std::vector<CommitEntry>> decide_commit(const CommitView& view, const CommitRuleOptions& options);

// The tokens of a full round for a commit of `entries`: the round tokens of every site that trains
// on (live) or has finished (it trains no more, so it counts as zero progress, not as absent),
// unless paused (or caught equivocating: DeltaBook puts those among the paused), and of every site
// among the entries. A site whose lease lapsed is out: the job goes on without it.
double full_round_tokens(const CommitView& view, const std::vector<CommitEntry>& entries);

// How far a commit of `entries` (one fragment's) moves the weights, as a share of their weighted
// mean: the entries' weight over the tokens they hold, or over `round_tokens` when that is more. 1
// for fresh deltas of a full round; less when staleness discounted some, or sites are missing.
// Pure, so every site scales a version alike from its record.
double commit_share(std::int64_t version, const std::vector<CommitEntry>& entries, double round_tokens,
                    const CommitRuleOptions& options);

}  // namespace meridian
