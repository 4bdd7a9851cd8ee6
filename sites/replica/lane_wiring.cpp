#include "sites/replica/lane_wiring.hpp"

#include <map>
#include <string>
#include <vector>

namespace meridian {

void open_site_lanes(SiteLanes& lanes, KeptParts& kept, Communicator& group, const LaneLeader& leader,
                     const std::optional<ShardMap>& parts, std::uint64_t unit) {
  const bool in_parts = parts && group.size() > 1;
  // A group that no longer takes parts (one replica left of a sharded site) keeps none of those
  // still coming, cut for the group it was: its leader would hold a delta in parts on a whole state.
  kept.reform(group.rank(), in_parts ? parts : std::nullopt);
  auto addresses = lanes.open(group, leader.cross != nullptr);
  if (!leader.cross) return;
  leader.striped->set_lanes(static_cast<int>(addresses.size()));
  leader.striped->forget_parts();
  leader.cross->drop_held_in_parts();
  leader.cross->set_lanes(std::move(addresses), in_parts ? unit : 0);
}

void sync_site_lanes(SiteLanes& lanes, Communicator& group, const LaneLeader& leader, std::optional<double> wan_start) {
  if (leader.cross) {
    auto peers = leader.cross->peer_lanes();
    // The members' lanes hear from the peer's own link too (a peer with fewer lanes than this site).
    std::map<std::string, std::vector<std::string>> by_site;
    for (const auto& [address, peer] : peers)
      if (const std::string* site = leader.cross->known_site(address)) {
        auto& all = by_site[*site];
        all = peer.lanes;
        all.insert(all.begin(), address);
      }
    leader.striped->set_peer_lanes(std::move(peers));
    lanes.set_peers(std::move(by_site), wan_start);
  }
  lanes.sync(group, leader.cross != nullptr);
  if (leader.cross)
    for (auto& held : leader.striped->take_held())
      leader.cross->arrive_in_parts(held.owner, held.transfer_id, held.tag, std::move(held.reports));
}

}  // namespace meridian
