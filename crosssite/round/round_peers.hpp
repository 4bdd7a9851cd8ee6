#pragma once
// What a site's round needs from the other sites, on its leader: CrossSite, over the control
// plane and the link; a decorator of it in the simulator's mutation tests.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "crosssite/outer/outer_state.hpp"
#include "crosssite/round/proposer.hpp"
#include "crosssite/round/records.hpp"
#include "transport/chunking/chunker.hpp"

namespace meridian {

class RoundPeers {
 public:
  virtual ~RoundPeers() = default;
  // The first round number not used yet by this site, in any incarnation.
  virtual std::int64_t next_round() const = 0;
  virtual std::size_t chunk_bytes() const = 0;
  virtual void submit(const DeltaAnnouncement& a, std::vector<std::byte> encoded, ChunkHashes hashes) = 0;
  // Pumps for up to `budget`: the next version's commit once it can be applied, or a peer's
  // state when this site is behind.
  virtual std::optional<VersionCommit> poll_commit(const OuterState& state, std::chrono::milliseconds budget) = 0;
  // This site's newest round after `after` that no version can ever merge, once no version can
  // come without it either (every live site's round on the version was refused), if any.
  virtual std::optional<std::int64_t> lost_round(const OuterState& state, std::int64_t after) const = 0;
  // Whether no version can merge this site's `round` (commit_rule's `mergeable`: refused for its
  // values, withdrawn, too stale...), whatever the others' rounds; false while the control plane
  // is out of reach or the round is not read back yet.
  virtual bool unmergeable(const OuterState& state, std::int64_t round) const = 0;
  // This site was caught sending a peer other bytes than it announced (rightly or not): no
  // version merges its rounds, and none waits for them.
  virtual bool disputed() const = 0;
  // This site's copy of the outer state did not give `version`'s hash (silent corruption here, or
  // a record that does not say what its deltas make): it applies no more commits to that copy and
  // takes a peer's state of `version` or newer instead. `why` is for the site's log.
  virtual void diverged(std::int64_t version, const std::string& why) = 0;
  // The hash the weights of `version` give, when it is the version this site holds and something
  // says (its record; version 0's from the weights the process built).
  virtual std::optional<std::uint64_t> held_hash(std::int64_t version) const = 0;
  // This site's rounds announced and still mergeable (0 while the control plane is out of reach).
  virtual std::int64_t backlog(const OuterState& state) const = 0;
  // Every live site's last round is merged and all of them ended: the job's last version is here.
  virtual bool finished(const OuterState& state) = 0;
  virtual std::int64_t newest_commit() const = 0;
  virtual std::int64_t peers_newest_round() const = 0;
  // The site drains: it announces no more rounds, so no commit waits for one (its record says so
  // from the next look on); a join takes this back.
  virtual void stop_announcing() = 0;
  virtual void leave() = 0;

  // A sharded outer state (OuterState::sharded) cannot hash a proposal, nor give a peer its state,
  // on the leader alone: the replicas do it together at the next attempt.
  // The proposal decided at the last look, once, for the replicas to preview their parts of ...
  virtual std::optional<ProposalPreview> take_preview() = 0;
  // ... and the hash of their parts together: the proposal is claimed with it.
  virtual void previewed(std::uint64_t hash) = 0;
  // Whether a peer asked for this site's state, which the replicas put together for it.
  virtual bool state_wanted() const = 0;
  virtual void state_assembled(std::int64_t version, std::vector<std::byte> snapshot) = 0;
};

}  // namespace meridian
