// A simulated site's replicas: their processes, which of them leads and its leader side (as a
// real replica's SiteExchange builds and lets go of one), and a replica's death and restart alone.
#include <algorithm>

#include "core/util/rng.hpp"
#include "crosssite/control/etcd_auth.hpp"
#include "crosssite/round/courier.hpp"
#include "sim/protocol/mutant_seams.hpp"
#include "sim/protocol/sim_site.hpp"
#include "sim/protocol/sim_site_state.hpp"

namespace meridian {

using namespace sim_site_detail;

namespace {

class KeptSimLease final : public KeptLease {
 public:
  explicit KeptSimLease(std::shared_ptr<bool> lost) : lost_(std::move(lost)) {}
  bool lost() const override { return *lost_; }

 private:
  std::shared_ptr<bool> lost_;
};

}  // namespace

std::unique_ptr<SimSite::Process> SimSite::new_process(Incarnation& inc, int replica, const Disk& disk) {
  auto p = std::make_unique<Process>(disk, plan_, world_.job.seed, name_, inc.wire, replica == 0,
                                     static_cast<RoundEvents&>(*this), [this] { return world_.clock.now(); });
  if (inc.shards)
    p->hold = [shards = inc.shards.get(), replica](std::vector<std::byte> bytes) {
      shards->hold(replica, std::move(bytes));
    };
  return p;
}

void SimSite::take_lead() {
  Incarnation& inc = *incarnation_;
  Process& leader = inc.leader();
  for (Process* p : inc.live())
    if (p != &leader && p->lead) {
      p->driver.lead(nullptr);
      p->lead.reset();  // its CrossSite revokes its lease: its key, if still on it, goes
    }
  if (!leader.lead) leader.lead = make_leader_side(inc, leader, static_cast<int>(inc.leader_index()));
  leader.lead->cross->set_proposing(!paused_outer_);
  for (Process* p : inc.live()) p->driver.lead(p == &leader ? &leader.lead->round_peers() : nullptr);
}

std::unique_ptr<SimSite::LeaderSide> SimSite::make_leader_side(Incarnation& inc, Process& process, int replica) {
  const SimMutations& mutations = world_.job.mutations;
  auto side = std::make_unique<LeaderSide>();
  LeaderSide* raw = side.get();
  // The incarnation's first leader side takes the names and streams an incarnation always had.
  const std::uint64_t k = inc.leader_sides++;
  side->control = std::make_unique<MemoryControlPlane>(world_.store, world_.clock,
                                                       world_.job.seed * 131 + incarnations_ + 1000003 * k);
  // As etcd's auth holds a site's user: a call outside its grants is a bug of the protocol's.
  side->control->confine(etcd_site_permissions(world_.job.name, name_),
                         [this](const std::string& what) { world_.checker.fail(name_ + "'s " + what); });
  if (mutations.overwrite_commits) side->overwriting = std::make_unique<OverwritingControlPlane>(*side->control);
  std::string address = "sim://" + name_ + "/" + std::to_string(incarnations_);
  if (k > 0) address += "/lead" + std::to_string(replica) + "." + std::to_string(k);
  side->link = world_.network.open(address);
  if (mutations.equivocation.first == name_) {
    const std::string victim = "sim://" + mutations.equivocation.second + "/";
    side->link = std::make_unique<ForgingLink>(std::move(side->link),
                                               [victim](const std::string& to) { return to.starts_with(victim); });
  }
  if (world_.job.split) {
    StripedLink::Options striping{static_cast<std::uint16_t>(LinkTag::Stripe), [](std::uint64_t id, std::uint16_t tag) {
                                    return tag == static_cast<std::uint16_t>(LinkTag::Delta) && first_attempt(id);
                                  }};
    if (inc.shards) inc.shards->wire(striping, replica);
    auto striped = std::make_unique<StripedLink>(std::move(side->link), std::move(striping));
    side->striped = striped.get();
    side->link = std::move(striped);
  }
  CrossSiteOptions o = world_.job.cross;
  o.job = world_.job.name;
  o.site = name_;
  o.sites = world_.job.sites;
  o.journal = journal_;  // the site's run directory is every replica's
  if (mutations.recordless_journal) o.journal = std::make_shared<RecordlessJournal>(journal_);
  // Its disk's state, as a real site's newest checkpoint holds it (a sharded one's parts: not rebuilt).
  if (!inc.shards) o.saved_state = [this]() -> std::optional<OuterState> { return disk_->state; };
  o.rule.fragments = world_.job.fragments;
  o.origin_hash =
      OuterState::weights_hash(sim_initial_weights(world_.job.params));  // a sharded state's parts together too
  o.incarnation = Rng::derive(world_.job.seed, incarnations_ * 1000 + static_cast<std::uint64_t>(name_[0]) + 100000 * k)
                      .next_u64() |
                  1;
  o.keep_lease = [raw](std::int64_t id) {
    auto lease = std::make_shared<Lease>(Lease{id, false});
    raw->lease = lease;
    return std::make_unique<KeptSimLease>(std::shared_ptr<bool>(lease, &lease->lost));
  };
  o.change_feed = [this, raw](const std::string&, std::vector<std::string> areas) {
    return std::make_unique<MemoryChangeFeed>(world_.store, *raw->control, std::move(areas));
  };
  ControlPlane& control = side->overwriting ? *side->overwriting : *side->control;
  side->cross = std::make_unique<CrossSite>(std::move(o), control, *side->link, [this] { return world_.clock.now(); });
  side->cross->serve_state(&process.now.state);
  if (mutations.reapply_adopted) side->peers = std::make_unique<ReapplyingPeers>(*side->cross);
  return side;
}

void SimSite::reform() {
  Incarnation& inc = *incarnation_;
  take_lead();
  const OuterCut cut = inc.shards->form(sides(), lane_leader(), false);
  if (cut.mirrors > 0) ++mirror_cuts_;
  if (cut.older) {
    world_.checker.fail(name_ + "'s replicas re-formed on version " + std::to_string(cut.version) +
                        ", older than the newest they held, though no part died with its mirror");
    dropped_by_cut();
  }
  // A drained site stays out until it is resumed (its mode outlives the group: SiteMode::agree).
  if (drained_) return;
  // Joined again, the site catches up before it trains on; a drain asked for is still asked.
  if (inc.phase == Phase::Draining) inc.drain_asked = true;
  inc.phase = Phase::Joining;
}

void SimSite::dropped_by_cut() {
  // cut_outer_state dropped the round in flight from the working weights, and so its progress
  for (Process* p : incarnation_->live()) std::fill(p->now.progress.begin(), p->now.progress.end(), 0.0f);
  say("its group took an older state of version " + std::to_string(version()) + ": the round in flight dropped");
}

void SimSite::kill_replica(int replica) {
  if (!incarnation_ || !incarnation_->shards) return;
  Incarnation& inc = *incarnation_;
  auto& process = inc.replicas[static_cast<std::size_t>(replica)];
  if (!process || inc.live().size() == 1) return;  // the last one's death is the site's crash
  const bool led = process.get() == &inc.leader();
  ++replica_deaths_;
  leader_deaths_ += led;
  say("replica " + std::to_string(replica) + (led ? ", the leader," : "") + " died");
  if (process->lead) process->lead->control->faults().down = true;  // a dead process revokes nothing
  process.reset();
  inc.shards->kill(replica);
  reform();
  apply_faults();  // a new leader's link, cut off with the site if the site is
}

int SimSite::leader_replica() const {
  return incarnation_ && incarnation_->shards ? static_cast<int>(incarnation_->leader_index()) : -1;
}

void SimSite::restart_replica(int replica, bool lose_disk) {
  if (!incarnation_ || !incarnation_->shards) return;
  Incarnation& inc = *incarnation_;
  auto& process = inc.replicas[static_cast<std::size_t>(replica)];
  if (process) return;  // the whole site restarted meanwhile: every replica did
  Disk& disk = part_disks_[static_cast<std::size_t>(replica)];
  if (lose_disk) disk.state = initial_disk().state;
  say("replica " + std::to_string(replica) + (lose_disk ? " restarted without its disk" : " restarted from its disk"));
  inc.shards->restart(replica);
  process = new_process(inc, replica, healed(disk, inc.leader().now));
  process->driver.pause(paused_outer_);
  reform();
  apply_faults();  // its lane (and if it leads, its link), cut off with the site if the site is
}

SimSite::Disk SimSite::healed(const Disk& own, const Disk& leader) {
  return Disk{own.state, leader.local, leader.progress, leader.step};
}

}  // namespace meridian
