#pragma once
// A split exchange's lanes (site_lanes.hpp) wired to the leader's CrossSite and striped link, the
// same in a real site (site_exchange.hpp) and in the protocol simulator's (sim/protocol): what the
// group does at each (re)formation and after each round attempt.
#include <cstdint>
#include <optional>

#include "core/model/shard_map.hpp"
#include "crosssite/round/cross_site.hpp"
#include "intrasite/comm/communicator.hpp"
#include "sites/replica/kept_parts.hpp"
#include "sites/replica/site_lanes.hpp"
#include "transport/link/striped_link.hpp"

namespace meridian {

// The leader's side: its CrossSite and striped link (null on the other members).
struct LaneLeader {
  CrossSite* cross = nullptr;
  StripedLink* striped = nullptr;
};

// Every member, at the group's (re)formation. `parts`: the group's outer cut when the site takes
// peers' deltas in parts (a sharded outer state in a group of several), cut on `unit`: what this
// replica kept before is gone, and so is what its leader held of them; without one (or alone)
// it keeps no part.
void open_site_lanes(SiteLanes& lanes, KeptParts& kept, Communicator& group, const LaneLeader& leader,
                     const std::optional<ShardMap>& parts, std::uint64_t unit);
// Every member, after each round attempt: the leader's orders and the peers' lanes out, the
// stripes and parts' reports in, and the deltas whose every part is kept to CrossSite.
// `wan_start`: the emulated WAN's start the leader knows, if any.
void sync_site_lanes(SiteLanes& lanes, Communicator& group, const LaneLeader& leader, std::optional<double> wan_start);

}  // namespace meridian
