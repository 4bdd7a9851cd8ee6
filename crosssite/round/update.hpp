#pragma once
// What the replicas of a site share about rounds, once per attempt: the leader alone talks to the
// other sites, decides, and hands every replica the same Update (ReplicaChannel::share); each then
// applies it to its own OuterState and weights, so all of them stay bit-identical.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "crosssite/outer/merged_deltas.hpp"

namespace meridian {

struct Update {
  enum class Kind : std::uint8_t {
    Nothing,    // no version this attempt
    Commit,     // version `version`: one outer step per fragment of `fragments` on `mean`
    Snapshot,   // a peer's whole state of version `version`, to adopt; the site goes on from `job_step`
    DropRound,  // this site's round `version` can never be merged: its progress goes
    // A sharded site's proposal of version `version` (its `fragments` and `mean`): every replica
    // previews its part, and the leader claims the version with the hash of the parts together.
    Preview,
  };
  Kind kind = Kind::Nothing;
  bool waits = false;             // after this attempt the site still waits for the other sites
  std::int64_t version = 0;       // or, for DropRound, the round
  std::uint64_t params_hash = 0;  // Commit, Snapshot: the weights' hash the commit record names
  std::int64_t job_step = 0;      // Snapshot, and a rejoin's take-up: where the job is
  std::int64_t backlog = 0;       // when a wait on the backlog ends: this site's rounds still mergeable
  // The version the site's next round aims at, as the leader has it: a replica that joined since
  // (healed from a peer, its own round state fresh) sends the same fragment as the others.
  std::int64_t aim = 0;
  std::vector<int> fragments;     // Commit: ascending
  std::vector<float> mean;        // Commit, Preview: the fragments' mean deltas, one after the other
  std::vector<std::byte> snapshot;  // Snapshot
  // Commit: this site proposed it, and a sharded site's replicas previewed it already (Preview).
  bool proposed_here = false;
  // A sharded site: a peer asked for this site's state, and the replicas hand the leader their parts.
  bool gather_state = false;
  // Commit, Preview of a sharded site: the deltas, still encoded, instead of `mean`; each replica
  // takes the mean of the parts it holds.
  std::optional<MergedDeltas> merged;
};

}  // namespace meridian
