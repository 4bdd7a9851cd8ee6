#pragma once
// What the replicas of a site whose outer state is sharded ([parallel] shard_outer: each holds
// one ShardMap part, OuterState::sharded) do together at a round's points: the parts of an
// encoded delta, of a version's chunk hashes and of a state's records go to every replica (or to
// the leader), and each part of the rebased weights to every replica. Over the site's
// Communicator in a real site (sites/replica/group_parts), over a TurnGroup in the protocol
// simulator's sharded sites (sim/protocol/sim_shards).
#include <cstddef>
#include <span>
#include <vector>

#include "crosssite/outer/outer_state.hpp"

namespace meridian {

class SiteParts {
 public:
  virtual ~SiteParts() = default;
  // Every replica's bytes, in rank order, on every replica; all call it together.
  virtual std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> mine) = 0;
  // The same at the leader (rank 0) only; the others get nothing.
  virtual std::vector<std::vector<std::byte>> gather(std::span<const std::byte> mine) = 0;
  // `values` holds a value per parameter: each replica's outer part of it goes to every replica.
  virtual void all_gather(std::span<float> values) = 0;
  // Cuts `state` anew from every part's owner (sites/replica/outer_cut), each replica's mirror
  // included: a mirror found stale is replaced. `weights`: the replica's working weights. The
  // bytes of records received here.
  virtual std::size_t recut(OuterState& state, std::span<float> weights) = 0;
};

}  // namespace meridian
