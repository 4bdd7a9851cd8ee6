#include "sim/protocol/sim_shards.hpp"

#include "crosssite/round/records.hpp"
#include "sites/replica/group_channel.hpp"
#include "sites/replica/group_parts.hpp"

namespace meridian {

SimShards::Process::Process(const LaneLink& lane_link, std::string name)
    : lanes(
          static_cast<std::uint16_t>(LinkTag::Stripe),
          [lane_link, name = std::move(name)](const SiteLanes::SiteOf&) { return lane_link(name); }, nullptr,
          cut_part_on, kept) {}

SimShards::SimShards(std::size_t params, int replicas, const LaneLink& lane_link, DeltaJournal& journal)
    : params_(params),
      map_(params, replicas),
      journal_(journal),
      lane_link_(lane_link),
      lives_(static_cast<std::size_t>(replicas), 1) {
  for (int r = 0; r < replicas; ++r)
    processes_.push_back(std::make_unique<Process>(lane_link_, "lane" + std::to_string(r)));
}

void SimShards::wire(StripedLink::Options& options, int replica) {
  options.cuts = [unit = map_.unit()](std::uint64_t peer_unit) { return peer_unit > 0 && peer_unit % unit == 0; };
  options.cut_part = cut_part_on;
  // The link dies with the replica's process, or is let go of while the process lives on.
  options.keep_part = [this, replica](const std::string& owner, const Stripe& stripe) {
    return processes_[static_cast<std::size_t>(replica)]->kept.keep(owner, stripe);
  };
}

void SimShards::restart(int replica) {
  const auto r = static_cast<std::size_t>(replica);
  processes_[r] =
      std::make_unique<Process>(lane_link_, "lane" + std::to_string(replica) + "." + std::to_string(++lives_[r]));
}

OuterCut SimShards::form(const Sides& sides, const LaneLeader& leader, bool fresh) {
  const int size = static_cast<int>(sides.size());
  map_ = ShardMap(params_, size);
  if (!group_ || group_->size() != size) group_ = std::make_unique<TurnGroup>(size);
  // As a real site's: the leader's lanes take its striped link's orders, and a replica that led
  // before has let go of its link.
  for (const Side& side : sides)
    processes_[static_cast<std::size_t>(side.replica)]->lanes.lead(&side == &sides.front() ? leader.striped : nullptr);
  OuterCut leaders;
  group_->run([&](Communicator& comm) {
    const auto rank = static_cast<std::size_t>(comm.rank());
    const Side& side = sides[rank];
    Process& process = *processes_[static_cast<std::size_t>(side.replica)];
    const OuterCut cut = cut_outer_state(comm, side.state, map_, side.training.weights(), false, fresh);
    if (rank == 0) leaders = cut;
    // As a real site's (SiteExchange::open_lanes): peers' deltas come in parts only to a state in parts.
    const auto parts = side.state.sharded() ? std::optional(map_) : std::nullopt;
    open_site_lanes(process.lanes, process.kept, comm, rank == 0 ? leader : LaneLeader{}, parts, map_.unit());
  });
  leader.cross->forget_proposal();  // as a real site's leader does after the cut (SiteExchange::cut_outer)
  return leaders;
}

void SimShards::run(const Sides& sides, const LaneLeader& leader,
                    const std::function<void(RoundDriver&, Replica&)>& call) {
  group_->run([&](Communicator& comm) {
    const auto rank = static_cast<std::size_t>(comm.rank());
    const Side& side = sides[rank];
    Process& process = *processes_[static_cast<std::size_t>(side.replica)];
    // As a real site's (SiteExchange::drive): a group of one holds the state whole.
    GroupChannel::HeldRanges held;
    if (side.state.sharded()) held = [this](int r) { return held_ranges(map_, r); };
    GroupChannel channel(comm, rank == 0, side.state.fragments(), std::move(held), &process.kept, &journal_);
    std::optional<GroupParts> parts;
    if (side.state.sharded()) parts.emplace(comm, map_);
    Replica replica{channel, side.training, parts ? &*parts : nullptr};
    call(side.driver, replica);
    sync_site_lanes(process.lanes, comm, rank == 0 ? leader : LaneLeader{}, std::nullopt);
  });
}

std::vector<std::string> SimShards::lane_addresses() const {
  std::vector<std::string> addresses;
  for (const auto& process : processes_)
    if (const Lane* lane = process ? process->lanes.lane() : nullptr) addresses.push_back(lane->address());
  return addresses;
}

}  // namespace meridian
