#include "sim/protocol/sim_site.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "core/util/hash.hpp"
#include "core/util/rng.hpp"
#include "crosssite/round/courier.hpp"
#include "sim/protocol/mutant_seams.hpp"
#include "sim/protocol/sim_site_state.hpp"
#include "transport/chunking/chunker.hpp"

namespace meridian {

using namespace sim_site_detail;

namespace {

using namespace std::chrono_literals;

class KeptSimLease final : public KeptLease {
 public:
  explicit KeptSimLease(std::shared_ptr<bool> lost) : lost_(std::move(lost)) {}
  bool lost() const override { return *lost_; }

 private:
  std::shared_ptr<bool> lost_;
};

}  // namespace

std::vector<float> sim_initial_weights(std::size_t n) {
  std::vector<float> w(n);
  for (std::size_t i = 0; i < n; ++i) w[i] = 0.5f - 0.03f * static_cast<float>(i % 29);
  return w;
}

FragmentPlan sim_fragments(std::size_t n, int fragments) {
  FragmentPlan plan;
  const std::size_t each = n / static_cast<std::size_t>(fragments);
  for (int f = 0; f < fragments; ++f) {
    const std::size_t offset = static_cast<std::size_t>(f) * each;
    const std::size_t count = f + 1 == fragments ? n - offset : each;
    plan.push_back(Fragment{{FragmentRange{offset, count}}, {std::string("w").append(std::to_string(f))}, count});
  }
  return plan;
}

SimSite::SimSite(SimWorld& world, std::string name) : world_(world), name_(std::move(name)) {
  disk_ = std::make_unique<Disk>(initial_disk());
  if (world_.job.shard_outer) {
    const auto at = std::find(world_.job.sites.begin(), world_.job.sites.end(), name_) - world_.job.sites.begin();
    const int replicas = static_cast<std::size_t>(at) < world_.job.replicas.size()
                             ? world_.job.replicas[static_cast<std::size_t>(at)]
                             : 2;
    member_disks_.assign(static_cast<std::size_t>(replicas - 1), *disk_);
  }
  start();
}

SimSite::~SimSite() = default;

SimSite::Disk SimSite::initial_disk() const {
  const auto w = sim_initial_weights(world_.job.params);
  return Disk{OuterState(w, world_.job.outer, CodecOptions{CodecKind::Fp32}, false,
                         sim_fragments(w.size(), world_.job.fragments)),
              w, std::vector<float>(w.size()), 0};
}

void SimSite::say(const std::string& what) const {
  if (!world_.trace) return;
  std::ostringstream out;
  out.precision(3);
  out << std::fixed << world_.clock.now() << " " << name_ << ": " << what;
  world_.trace(out.str());
}

void SimSite::start() {
  const Disk& disk = *disk_;
  ++incarnations_;
  auto inc = std::make_unique<Incarnation>(disk);
  const SimMutations& mutations = world_.job.mutations;
  // A replica's lane, a link of its own: its address names the incarnation.
  const auto lane_link = [this](const std::string& lane) {
    return world_.network.open("sim://" + name_ + "/" + std::to_string(incarnations_) + "/" + lane);
  };
  inc->control = std::make_unique<MemoryControlPlane>(world_.store, world_.clock, world_.job.seed * 131 + incarnations_);
  if (mutations.overwrite_commits) inc->overwriting = std::make_unique<OverwritingControlPlane>(*inc->control);
  inc->link = world_.network.open("sim://" + name_ + "/" + std::to_string(incarnations_));
  if (mutations.equivocation.first == name_) {
    const std::string victim = "sim://" + mutations.equivocation.second + "/";
    inc->link = std::make_unique<ForgingLink>(std::move(inc->link),
                                              [victim](const std::string& address) { return address.starts_with(victim); });
  }
  if (world_.job.split) {
    StripedLink::Options striping{static_cast<std::uint16_t>(LinkTag::Stripe), [](std::uint64_t id, std::uint16_t tag) {
                                    return tag == static_cast<std::uint16_t>(LinkTag::Delta) && first_attempt(id);
                                  }};
    if (world_.job.shard_outer) {
      const int replicas = 1 + static_cast<int>(member_disks_.size());
      inc->shards = std::make_unique<SimShards>(world_.job.params, replicas, lane_link, *journal_);
      inc->shards->wire(striping);
    }
    auto striped = std::make_unique<StripedLink>(std::move(inc->link), std::move(striping));
    inc->striped = striped.get();
    inc->link = std::move(striped);
  }
  CrossSiteOptions o = world_.job.cross;
  o.job = world_.job.name;
  o.site = name_;
  o.sites = world_.job.sites;
  o.journal = journal_;
  o.rule.fragments = world_.job.fragments;
  o.incarnation = Rng::derive(world_.job.seed, incarnations_ * 1000 + static_cast<std::uint64_t>(name_[0])).next_u64() | 1;
  Incarnation* raw = inc.get();
  o.keep_lease = [raw](std::int64_t id) {
    auto lease = std::make_shared<Lease>(Lease{id, false});
    raw->lease = lease;
    return std::make_unique<KeptSimLease>(std::shared_ptr<bool>(lease, &lease->lost));
  };
  o.change_feed = [this, raw](const std::string&, std::vector<std::string> areas) {
    return std::make_unique<MemoryChangeFeed>(world_.store, *raw->control, std::move(areas));
  };
  ControlPlane& control = inc->overwriting ? *inc->overwriting : *inc->control;
  inc->cross = std::make_unique<CrossSite>(std::move(o), control, *inc->link, [this] { return world_.clock.now(); });
  inc->cross->serve_state(&inc->now.state);
  if (paused_outer_) inc->cross->set_proposing(false);
  if (mutations.reapply_adopted) inc->peers = std::make_unique<ReapplyingPeers>(*inc->cross);
  inc->steps = std::make_unique<Steps>(inc->now, world_.job.seed, name_);
  RoundPlan plan;
  plan.site = name_;
  plan.inner_steps = static_cast<int>(kStepsPerExchange);
  plan.job_round_steps = static_cast<int>(kStepsPerExchange);
  plan.total_steps = world_.job.rounds * kStepsPerExchange;
  plan.overlap = world_.job.overlap;
  plan.eager = world_.job.overlap && world_.job.eager;
  plan.overlap_steps = static_cast<int>(kStepsPerExchange);
  plan.eager_share = 1.0 / static_cast<double>(world_.job.sites.size());
  plan.replicas_send = world_.job.split;
  RoundEvents& events = *this;
  inc->driver = std::make_unique<RoundDriver>(plan, inc->now.state, events, [this] { return world_.clock.now(); });
  inc->driver->lead(inc->peers ? inc->peers.get() : static_cast<RoundPeers*>(inc->cross.get()));
  const auto clock = [this] { return world_.clock.now(); };
  if (inc->shards) {
    // Each replica's outer part from its own disk, its training as the group's heal leaves it: the
    // leader's (a member dead at the last checkpoint holds an older one).
    for (std::size_t i = 0; i < member_disks_.size(); ++i)
      inc->members.push_back(new_member(*inc, static_cast<int>(i) + 1, healed(member_disks_[i], disk)));
  } else {
    inc->members.push_back(std::make_unique<Member>(disk, plan, world_.job.seed, name_, inc->wire, clock));
  }
  Member& m = *inc->members.front();
  if (inc->striped && !inc->shards) {
    m.lane = std::make_unique<Lane>(lane_link("lane1"), static_cast<std::uint16_t>(LinkTag::Stripe));
    m.hold = [lane = m.lane.get()](std::vector<std::byte> bytes) {
      lane->hold(std::make_shared<const std::vector<std::byte>>(std::move(bytes)));
    };
    inc->striped->set_lanes(1);
    inc->cross->set_lanes({m.lane->address()});
  }
  inc->driver->pause(paused_outer_);
  for (auto& member : inc->members) member->driver.pause(paused_outer_);
  incarnation_ = std::move(inc);
  // The group's first formation: each replica keeps its part of the outer state (from its
  // weights when none ever began a round) and the lanes open.
  if (incarnation_->shards &&
      incarnation_->shards->form(sides(), lane_leader(), disk.state.version() == 0 && disk.step == 0).older)
    dropped_by_cut();  // members restarted without their disks left a hole at the newest state
  apply_faults();
  world_.checker.restarted(name_, incarnation_->now.state.version());  // after the cut: it may take an older state
}

void SimSite::tick() {
  if (!incarnation_ || stopped_ || drained_ || done_) return;
  Incarnation& inc = *incarnation_;
  if (inc.phase == Phase::Joining) return join();
  if (inc.driver->waiting()) {
    attempt();
    if (incarnation_ && !incarnation_->driver->waiting()) wait_ended();
    return;
  }
  // An operator's command is taken between two steps of training, as a real site's replicas take
  // it together after a step (ReplicaProcess::apply_commands).
  if (inc.rollback_asked && inc.phase == Phase::Training) {
    inc.rollback_asked = false;
    return roll_back();
  }
  if (inc.drain_asked && inc.phase == Phase::Training) {
    inc.drain_asked = false;
    inc.phase = Phase::Draining;
    return on_replicas([](RoundDriver& d, Replica&) { d.drain(); });
  }
  if (inc.now.step >= inc.driver->plan().total_steps) {
    // Its last round went out before a restart: it waits for the job's end like any site.
    inc.phase = Phase::Ending;
    return on_replicas([](RoundDriver& d, Replica&) { d.end_job(); });
  }
  if (world_.clock.now() >= inc.next_at) train_step();
}

void SimSite::join() {
  Incarnation& inc = *incarnation_;
  if (!inc.cross->poll_join(0ms)) return log_events();
  say("joined at version " + std::to_string(inc.now.state.version()) + ", step " + std::to_string(inc.now.step));
  inc.phase = Phase::CatchingUp;
  on_replicas([](RoundDriver& d, Replica&) { d.catch_up(); });
}

void SimSite::attempt() {
  try {
    on_replicas([](RoundDriver& d, Replica& r) { d.attempt(r, 0ms); });
  } catch (const Error& e) {
    // A real site's process would stop here: the protocol let it reach a state it cannot go on from.
    world_.checker.fail(name_ + " stopped: " + e.what());
    incarnation_.reset();
    done_ = true;
    return;
  }
}

void SimSite::wait_ended() {
  Incarnation& inc = *incarnation_;
  switch (inc.phase) {
    case Phase::CatchingUp:
      inc.phase = std::exchange(inc.take_up, false) ? Phase::TakingUp : Phase::Training;
      if (inc.phase == Phase::TakingUp) on_replicas([](RoundDriver& d, Replica&) { d.take_up_job(); });
      inc.next_at = world_.clock.now() + world_.job.round_s / kStepsPerExchange;
      return;
    case Phase::TakingUp:
      inc.phase = Phase::Training;
      return;
    case Phase::Draining:
      if (std::exchange(inc.resume_asked, false)) {  // resumed while the drain went on: it comes back at once
        inc.phase = Phase::Joining;
        inc.take_up = true;
        return say("drained and resumed");
      }
      drained_ = true;
      say("drained: left the job");
      return;
    case Phase::Ending:
      done_ = true;
      world_.checker.finished(name_, inc.now.state.version(), whole_global());
      say("finished at version " + std::to_string(inc.now.state.version()));
      incarnation_.reset();  // the process exits: its lease is revoked
      return;
    case Phase::Training:
      // No site trains on past its backlog bound: at a round's end, with the control plane in
      // reach, it waits until at most one of its rounds is unmerged (a cut-off site counts none).
      if (std::exchange(inc.round_wait, false) && world_.job.overlap &&
          inc.cross->backlog(inc.now.state) > RoundDriver::kMaxBacklog)
        world_.checker.fail(name_ + " trains on with " + std::to_string(inc.cross->backlog(inc.now.state)) +
                            " of its rounds unmerged, past the backlog bound");
      return;
    case Phase::Joining:
      return;
  }
}

void SimSite::train_step() {
  Incarnation& inc = *incarnation_;
  const double scale = std::exchange(spike_, false) ? kSpike : 1.0;
  inc.steps->train(scale);
  for (Member* member : inc.live_members()) member->steps.train(scale);
  const std::int64_t done = inc.now.step;
  const bool last = done == inc.driver->plan().total_steps;
  const bool hold = paused_outer_ && !last;
  on_replicas([&](RoundDriver& d, Replica& r) { d.after_step(r, done, last, hold); });
  inc.next_at = world_.clock.now() + world_.job.round_s / kStepsPerExchange;
  if (last) inc.phase = Phase::Ending;
  inc.round_wait = inc.driver->round_ends(done) && !last && !hold;
  if (inc.driver->round_ends(done) && (done / kStepsPerExchange) % 3 == 0) save_disk();
}

void SimSite::on_replicas(const std::function<void(RoundDriver&, Replica&)>& call) {
  Incarnation& inc = *incarnation_;
  if (inc.shards) {
    try {
      inc.shards->run(sides(), lane_leader(), call);
    } catch (const PartsNotKept& e) {
      refetch(e);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Peer) throw;
      regroup(e);
    }
    const auto& f = inc.striped->figures();
    assembled_ += f.assembled - std::exchange(inc.assembled_seen, f.assembled);
    held_in_parts_ += f.held_in_parts - std::exchange(inc.held_seen, f.held_in_parts);
  } else {
    Replica leader{inc.channel, *inc.steps};
    call(*inc.driver, leader);
    Member& m = *inc.members.front();
    Replica member{m.channel, m.steps};
    call(m.driver, member);
    sync_lanes();
  }
  for (const Member* member : inc.live_members()) {
    const Member& m = *member;
    const bool same_global = inc.shards || OuterState::weights_hash(inc.now.state.global()) ==
                                               OuterState::weights_hash(m.now.state.global());
    const std::string differ = inc.now.local != m.now.local                  ? "working weights"
                               : inc.driver->waiting() != m.driver.waiting() ? "waits"
                               : !same_global                                ? "outer weights"
                                                                             : "";
    if (inc.now.state.version() != m.now.state.version() || inc.now.step != m.now.step || !differ.empty())
      world_.checker.fail(name_ + "'s replicas differ: the leader at version " +
                          std::to_string(inc.now.state.version()) + " step " + std::to_string(inc.now.step) +
                          ", a member at version " + std::to_string(m.now.state.version()) + " step " +
                          std::to_string(m.now.step) + (differ.empty() ? "" : ", their " + differ + " differ"));
  }
  if (inc.shards && !mirrors_hold()) world_.checker.fail(name_ + "'s mirrors differ from the parts they mirror");
  check_weights();
}

void SimSite::sync_lanes() {
  Incarnation& inc = *incarnation_;
  if (!inc.striped) return;
  Lane& lane = *inc.members.front()->lane;
  auto peer_lanes = inc.cross->peer_lanes();
  std::set<std::string> peers;
  for (const auto& [address, peer] : peer_lanes) {
    peers.insert(address);
    peers.insert(peer.lanes.begin(), peer.lanes.end());
  }
  inc.striped->set_peer_lanes(std::move(peer_lanes));
  lane.set_peers(std::move(peers));
  for (const auto& order : inc.striped->take_orders()) lane.carry(order);
  for (auto& [from, bytes] : lane.take_stripes()) inc.striped->feed(from, bytes);
  const auto assembled = inc.striped->figures().assembled;
  assembled_ += assembled - std::exchange(inc.assembled_seen, assembled);
}

SimShards::Sides SimSite::sides() {
  Incarnation& inc = *incarnation_;
  SimShards::Sides sides{SimShards::Side{0, *inc.driver, *inc.steps, inc.now.state}};
  for (std::size_t i = 0; i < inc.members.size(); ++i)
    if (Member* m = inc.members[i].get())
      sides.push_back(SimShards::Side{static_cast<int>(i) + 1, m->driver, m->steps, m->now.state});
  return sides;
}

LaneLeader SimSite::lane_leader() { return {incarnation_->cross.get(), incarnation_->striped}; }

void SimSite::refetch(const PartsNotKept& e) {
  Incarnation& inc = *incarnation_;
  ++refetches_;
  say(std::string("its replicas let go of the deltas held in parts: ") + e.what());
  inc.cross->drop_held_in_parts();
  if (inc.phase == Phase::Draining) inc.drain_asked = true;
  inc.phase = Phase::CatchingUp;
  inc.shards->run(sides(), lane_leader(), [](RoundDriver& d, Replica&) { d.catch_up(); });
}

void SimSite::regroup(const Error& e) {
  ++regroups_;
  say(std::string("its replicas re-formed their group: ") + e.what());
  reform();
}

void SimSite::reform() {
  Incarnation& inc = *incarnation_;
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
  Disk& d = incarnation_->now;
  std::fill(d.progress.begin(), d.progress.end(), 0.0f);  // cut_outer_state dropped the round in flight
  say("its group took an older state of version " + std::to_string(d.state.version()) +
      ": the round in flight dropped");
}

void SimSite::kill_replica(int replica) {
  if (!incarnation_ || !incarnation_->shards) return;
  auto& member = incarnation_->members[static_cast<std::size_t>(replica) - 1];
  if (!member) return;
  ++replica_deaths_;
  say("replica " + std::to_string(replica) + " died");
  member.reset();
  incarnation_->shards->kill(replica);
  reform();
}

void SimSite::restart_replica(int replica, bool lose_disk) {
  if (!incarnation_ || !incarnation_->shards) return;
  auto& member = incarnation_->members[static_cast<std::size_t>(replica) - 1];
  if (member) return;  // the whole site restarted meanwhile: every replica did
  Disk& disk = member_disks_[static_cast<std::size_t>(replica) - 1];
  if (lose_disk) disk.state = initial_disk().state;
  say("replica " + std::to_string(replica) + (lose_disk ? " restarted without its disk" : " restarted from its disk"));
  const Disk& leader = incarnation_->now;
  incarnation_->shards->restart(replica);
  member = new_member(*incarnation_, replica, healed(disk, leader));
  member->driver.pause(paused_outer_);
  reform();
  apply_faults();  // its lane, cut off with the site if the site is
}

SimSite::Disk SimSite::healed(const Disk& own, const Disk& leader) {
  return Disk{own.state, leader.local, leader.progress, leader.step};
}

std::unique_ptr<SimSite::Member> SimSite::new_member(Incarnation& inc, int replica, const Disk& disk) {
  const auto clock = [this] { return world_.clock.now(); };
  auto m = std::make_unique<Member>(disk, inc.driver->plan(), world_.job.seed, name_, inc.wire, clock);
  m->hold = [shards = inc.shards.get(), replica](std::vector<std::byte> bytes) {
    shards->hold(replica, std::move(bytes));
  };
  return m;
}

void SimSite::save_disk() {
  *disk_ = incarnation_->now;
  for (std::size_t i = 0; i < member_disks_.size(); ++i)
    if (const auto& m = incarnation_->members[i]) member_disks_[i] = m->now;  // a dead one's disk stays
  incarnation_->cross->durable(disk_->state.version());
}

void SimSite::renew_lease() {
  if (!incarnation_ || stopped_ || world_.job.mutations.never_renew_lease) return;
  const auto lease = incarnation_->lease.lock();
  if (!lease || lease->lost) return;
  try {
    incarnation_->control->keep_alive(lease->id);
  } catch (const EtcdLeaseGone&) {
    lease->lost = true;
  } catch (const Error&) {
    // Not renewed this beat: tried again at the next.
  }
}

void SimSite::crash() {
  if (!incarnation_) return;
  say("crashed");
  incarnation_->control->faults().down = true;  // a dead process revokes nothing: its lease lapses
  incarnation_.reset();
  drained_ = false;  // the operator's mode lives in the process
}

void SimSite::restart(bool lose_disk) {
  if (incarnation_ || done_) return;
  say(lose_disk ? "restarted without its disk" : "restarted from its disk");
  if (lose_disk) {
    journal_ = std::make_shared<MemoryDeltaJournal>();
    *disk_ = initial_disk();
    for (auto& d : member_disks_) d = *disk_;
  }
  start();
  incarnation_->take_up = lose_disk;
}

void SimSite::cut_off(bool cut) {
  cut_ = cut;
  apply_faults();
}

void SimSite::apply_faults() {
  if (!incarnation_) return;
  world_.network.isolate(incarnation_->link->address(), cut_);
  if (!incarnation_->shards)
    if (const auto& lane = incarnation_->members.front()->lane) world_.network.isolate(lane->address(), cut_);
  if (const auto& shards = incarnation_->shards)
    for (const auto& address : shards->lane_addresses()) world_.network.isolate(address, cut_);
  ControlFaults& f = incarnation_->control->faults();
  f.down = cut_ || world_.faults.outages > 0;
  f.lost_reply = world_.faults.lost_reply.contains(name_) ? world_.faults.lost_reply.at(name_) : 0;
  f.slow_reply_s = world_.faults.slow_reply_s.contains(name_) ? world_.faults.slow_reply_s.at(name_) : 0;
  f.late_write = world_.faults.late_write.contains(name_) ? world_.faults.late_write.at(name_) : 0;
}

void SimSite::drain() {
  if (!incarnation_ || drained_) return;
  say("drain");
  incarnation_->drain_asked = true;
}

void SimSite::resume() {
  if (!incarnation_) return;
  if (!drained_) {
    incarnation_->drain_asked = false;
    incarnation_->resume_asked = incarnation_->phase == Phase::Draining;
    return;
  }
  say("resume");
  drained_ = false;
  if (incarnation_->cross->job_over()) {
    done_ = true;  // every other site finished meanwhile: a drained site ends with them (drain_job_over)
    say("the job ended while drained");
    incarnation_.reset();
    return;
  }
  incarnation_->phase = Phase::Joining;
  incarnation_->take_up = true;
}

void SimSite::pause_outer(bool paused) {
  paused_outer_ = paused;
  if (incarnation_) {
    incarnation_->cross->set_proposing(!paused);
    incarnation_->driver->pause(paused);
    for (Member* member : incarnation_->live_members()) member->driver.pause(paused);
  }
  say(paused ? "pause-outer" : "resume-outer");
}

void SimSite::rollback() {
  if (!incarnation_) return;
  say("rollback asked");
  incarnation_->rollback_asked = true;
}

void SimSite::roll_back() {
  Disk& d = incarnation_->now;
  std::fill(d.progress.begin(), d.progress.end(), 0.0f);  // what the rollback drops
  on_replicas([](RoundDriver& driver, Replica& r) { driver.roll_back(r.training, r.parts); });
  say("rollback to version " + std::to_string(d.state.version()));
}

void SimSite::spike() {
  if (!incarnation_) return;
  spike_ = true;
  say("spike: its next step is " + std::to_string(static_cast<int>(kSpike)) + " times the usual");
}

std::int64_t SimSite::version() const { return incarnation_ ? incarnation_->now.state.version() : -1; }
std::int64_t SimSite::disk_version() const { return disk_->state.version(); }

std::string SimSite::describe() const {
  std::string s = name_;
  if (done_) return s + " done";
  if (!incarnation_) return s + " down";
  const Disk& d = incarnation_->now;
  s += " version " + std::to_string(d.state.version()) + " step " + std::to_string(d.step);
  if (stopped_) s += " stopped";
  if (drained_) s += " drained";
  if (cut_) s += " cut off";
  return s + ", waiting for " + incarnation_->cross->describe_wait();
}

}  // namespace meridian
