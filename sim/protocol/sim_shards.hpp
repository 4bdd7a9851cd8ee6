#pragma once
// A simulated site's replicas with DiLoCo's outer state sharded among them ([parallel]
// shard_outer, in a split exchange): each keeps its part and a mirror of the next one's, peers send
// each replica its part of their deltas, and the site puts nothing together at its leader. The
// replicas run the real group code of a site (GroupChannel, GroupParts, the outer cut, SiteLanes
// and KeptParts, lane_wiring) over a TurnGroup: each on a fiber of its own, one at a time, so
// that a seed still replays exactly. A member replica may die and come back alone (a new
// process): the group re-forms without it and again with it, as a real site's does.
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
#include "sites/replica/outer_cut.hpp"
#include "sites/replica/site_lanes.hpp"
#include "transport/link/striped_link.hpp"

namespace meridian {

// The values a simulated sharded site's model has: three units of the outer cut, the last one
// short, so that a site of two replicas holds parts of one unit and of nearly two, and one of
// three a unit each.
inline constexpr std::size_t kSimShardedParams = 2 * kShardUnit + 1000;

class SimShards {
 public:
  // One replica's side of the site: which of its replicas it is (0: the leader; its rank in the
  // group is its place among the live ones), its round, training and outer state.
  struct Side {
    int replica;
    RoundDriver& driver;
    Training& training;
    OuterState& state;
  };
  using Sides = std::vector<Side>;
  // A lane link named `name` (unique to the replica's process), made at a formation.
  using LaneLink = std::function<std::unique_ptr<Link>(const std::string& name)>;

  // `journal`: the site's, where each replica journals its part of a delta held in parts.
  SimShards(std::size_t params, int replicas, const LaneLink& lane_link, DeltaJournal& journal);

  // The striped link of replica `replica`'s leader side keeps that replica's own part of a delta
  // that comes in parts, and cuts parts for peers that take them.
  void wire(StripedLink::Options& options, int replica);
  // The group (re)formed of `sides`, the live replicas, the leader first: every replica's outer
  // state cut anew (`fresh`: none ever began a round, each cuts its part from its weights), its
  // kept parts dropped, the lanes opened. The leader's cut.
  OuterCut form(const Sides& sides, const LaneLeader& leader, bool fresh);
  // `call` on every replica of `sides` (the group last formed), each on its turn (the leader's
  // first), with the site's channel and parts; then the lanes' sync. The first error a replica let
  // out comes out here.
  void run(const Sides& sides, const LaneLeader& leader, const std::function<void(RoundDriver&, Replica&)>& call);
  // Replica `replica`'s copy of a delta its site sends (RoundEvents::encoded): its lane sends its stripes.
  void hold(int replica, std::vector<std::byte> bytes) {
    processes_[static_cast<std::size_t>(replica)]->lanes.hold(std::move(bytes));
  }
  // Replica `replica` died: what it kept and its lane go with it.
  void kill(int replica) { processes_[static_cast<std::size_t>(replica)].reset(); }
  // ... and came back as a new process: it opens a lane of its own, under a new name, at the next
  // formation.
  void restart(int replica);
  // The members' lane addresses (none before the first formation).
  std::vector<std::string> lane_addresses() const;

 private:
  // What a replica's process holds of the split exchange: the parts it kept and its lanes.
  struct Process {
    Process(const LaneLink& lane_link, std::string name);
    KeptParts kept;
    SiteLanes lanes;
  };

  std::size_t params_;
  ShardMap map_;
  DeltaJournal& journal_;
  LaneLink lane_link_;
  std::unique_ptr<TurnGroup> group_;
  std::vector<std::unique_ptr<Process>> processes_;  // by replica; null while dead
  std::vector<int> lives_;                           // by replica: the processes it has had
};

}  // namespace meridian
