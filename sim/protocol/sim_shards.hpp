#pragma once
// A simulated site's replicas with DiLoCo's outer state sharded among them ([parallel]
// shard_outer, in a split exchange): each keeps its part and a mirror of the next one's, peers send
// each replica its part of their deltas, and the site puts nothing together at its leader. The
// replicas run the real group code of a site (GroupChannel, GroupParts, the outer cut, SiteLanes
// and KeptParts, lane_wiring) over a TurnGroup: each on a thread of its own, one at a time, so
// that a seed still replays exactly.
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/model/shard_map.hpp"
#include "crosssite/round/round_driver.hpp"
#include "intrasite/comm/turn_group.hpp"
#include "sites/replica/kept_parts.hpp"
#include "sites/replica/lane_wiring.hpp"
#include "sites/replica/site_lanes.hpp"
#include "transport/link/striped_link.hpp"

namespace meridian {

// The values a simulated sharded site's model has: three units of the outer cut, the last one
// short, so that a site of two replicas holds parts of one unit and of nearly two, and one of
// three a unit each.
inline constexpr std::size_t kSimShardedParams = 2 * kShardUnit + 1000;

class SimShards {
 public:
  // One replica's side of the site: its round, training and outer state.
  struct Side {
    RoundDriver& driver;
    Training& training;
    OuterState& state;
  };
  using Sides = std::vector<Side>;
  // Replica `rank`'s lane link (ranks 1 and up), made at the first formation.
  using LaneLink = std::function<std::unique_ptr<Link>(int rank)>;

  // `journal`: the site's, where each replica journals its part of a delta held in parts.
  SimShards(std::size_t params, int replicas, const LaneLink& lane_link, DeltaJournal& journal);

  // The leader's striped link takes its own part of a delta that comes in parts, and cuts parts
  // for peers that take them.
  void wire(StripedLink::Options& options);
  // The group (re)formed: every replica's outer state cut anew (`fresh`: none ever began a round,
  // each cuts its part from its weights), its kept parts dropped, the lanes opened.
  void form(const Sides& sides, const LaneLeader& leader, bool fresh);
  // `call` on every replica, each on its turn (the leader's first), with the site's channel and
  // parts; then the lanes' sync. The first error a replica let out comes out here.
  void run(const Sides& sides, const LaneLeader& leader, const std::function<void(RoundDriver&, Replica&)>& call);
  // Replica `rank`'s copy of a delta its site sends (RoundEvents::encoded): its lane sends its stripes.
  void hold(int rank, std::vector<std::byte> bytes) { lanes_[static_cast<std::size_t>(rank)]->hold(std::move(bytes)); }
  // The members' lane addresses (none before the first formation).
  std::vector<std::string> lane_addresses() const;

 private:
  ShardMap map_;
  DeltaJournal& journal_;
  TurnGroup group_;
  std::vector<KeptParts> kept_;
  std::vector<std::unique_ptr<SiteLanes>> lanes_;
};

}  // namespace meridian
