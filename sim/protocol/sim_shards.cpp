#include "sim/protocol/sim_shards.hpp"

#include "crosssite/round/records.hpp"
#include "sites/replica/group_channel.hpp"
#include "sites/replica/group_parts.hpp"
#include "sites/replica/outer_cut.hpp"

namespace meridian {

SimShards::SimShards(std::size_t params, int replicas, const LaneLink& lane_link, DeltaJournal& journal)
    : map_(params, replicas), journal_(journal), group_(replicas), kept_(static_cast<std::size_t>(replicas)) {
  for (int r = 0; r < replicas; ++r)
    lanes_.push_back(std::make_unique<SiteLanes>(
        static_cast<std::uint16_t>(LinkTag::Stripe), [lane_link, r](const SiteLanes::SiteOf&) { return lane_link(r); },
        nullptr, cut_part_on, kept_[static_cast<std::size_t>(r)]));
}

void SimShards::wire(StripedLink::Options& options) {
  options.cuts = [unit = map_.unit()](std::uint64_t peer_unit) { return peer_unit > 0 && peer_unit % unit == 0; };
  options.cut_part = cut_part_on;
  options.keep_part = [this](const std::string& owner, const Stripe& stripe) { return kept_[0].keep(owner, stripe); };
}

void SimShards::form(const Sides& sides, const LaneLeader& leader, bool fresh) {
  lanes_[0]->lead(leader.striped);
  group_.run([&](Communicator& comm) {
    const auto rank = static_cast<std::size_t>(comm.rank());
    const Side& side = sides[rank];
    cut_outer_state(comm, side.state, map_, side.training.weights(), false, fresh);
    open_site_lanes(*lanes_[rank], kept_[rank], comm, rank == 0 ? leader : LaneLeader{}, map_, map_.unit());
  });
}

void SimShards::run(const Sides& sides, const LaneLeader& leader,
                    const std::function<void(RoundDriver&, Replica&)>& call) {
  group_.run([&](Communicator& comm) {
    const auto rank = static_cast<std::size_t>(comm.rank());
    const Side& side = sides[rank];
    GroupChannel channel(
        comm, rank == 0, side.state.fragments(), [this](int r) { return held_ranges(map_, r); }, &kept_[rank],
        &journal_);
    GroupParts parts(comm, map_);
    Replica replica{channel, side.training, &parts};
    call(side.driver, replica);
    sync_site_lanes(*lanes_[rank], comm, rank == 0 ? leader : LaneLeader{}, std::nullopt);
  });
}

std::vector<std::string> SimShards::lane_addresses() const {
  std::vector<std::string> addresses;
  for (const auto& lanes : lanes_)
    if (const Lane* lane = lanes->lane()) addresses.push_back(lane->address());
  return addresses;
}

}  // namespace meridian
