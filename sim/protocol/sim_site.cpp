#include "sim/protocol/sim_site.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <sstream>

#include "sim/protocol/sim_site_state.hpp"

namespace meridian {

using namespace sim_site_detail;
using namespace std::chrono_literals;

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
  plan_.site = name_;
  plan_.inner_steps = static_cast<int>(kStepsPerExchange);
  plan_.job_round_steps = static_cast<int>(kStepsPerExchange);
  plan_.total_steps = world_.job.rounds * kStepsPerExchange;
  if (world_.job.early_rounds > 0) {
    plan_.early_inner_steps = static_cast<int>(kStepsPerExchange / 2);
    plan_.early_steps = world_.job.early_rounds * plan_.early_inner_steps;
  }
  plan_.overlap = world_.job.overlap;
  plan_.eager = world_.job.overlap && world_.job.eager;
  plan_.overlap_steps = static_cast<int>(kStepsPerExchange);
  plan_.eager_share = 1.0 / static_cast<double>(world_.job.sites.size());
  plan_.replicas_send = world_.job.split;
  disk_ = std::make_unique<Disk>(initial_disk());
  if (world_.job.shard_outer) {
    const auto at = std::find(world_.job.sites.begin(), world_.job.sites.end(), name_) - world_.job.sites.begin();
    const int replicas = static_cast<std::size_t>(at) < world_.job.replicas.size()
                             ? world_.job.replicas[static_cast<std::size_t>(at)]
                             : 2;
    part_disks_.assign(static_cast<std::size_t>(replicas), *disk_);
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
  ++incarnations_;
  auto inc = std::make_unique<Incarnation>();
  // A replica's lane, a link of its own: its address names the incarnation.
  const auto lane_link = [this, incarnation = incarnations_](const std::string& lane) {
    return world_.network.open("sim://" + name_ + "/" + std::to_string(incarnation) + "/" + lane);
  };
  if (world_.job.shard_outer) {
    inc->shards =
        std::make_unique<SimShards>(world_.job.params, static_cast<int>(part_disks_.size()), lane_link, *journal_);
    // The replica that wrote the checkpoint (its leader then) takes it whole: its outer part is in
    // the same file as the training. Every other replica's part from its own disk, its training as
    // the group's heal leaves it: the checkpoint's (a replica dead at the last one holds an older part).
    for (std::size_t r = 0; r < part_disks_.size(); ++r)
      inc->replicas.push_back(new_process(
          *inc, static_cast<int>(r), static_cast<int>(r) == disk_writer_ ? *disk_ : healed(part_disks_[r], *disk_)));
  } else {
    for (int r = 0; r < 2; ++r) inc->replicas.push_back(new_process(*inc, r, *disk_));
  }
  incarnation_ = std::move(inc);
  Incarnation& i = *incarnation_;
  take_lead();
  if (const LeaderSide& lead = *i.leader().lead; lead.striped && !i.shards) {
    Process& m = *i.replicas[1];
    m.lane = std::make_unique<Lane>(lane_link("lane1"), static_cast<std::uint16_t>(LinkTag::Stripe));
    m.hold = [lane = m.lane.get()](std::vector<std::byte> bytes) {
      lane->hold(std::make_shared<const std::vector<std::byte>>(std::move(bytes)));
    };
    lead.striped->set_lanes(1);
    lead.cross->set_lanes({m.lane->address()});
  }
  for (Process* p : i.live()) p->driver.pause(paused_outer_);
  // The group's first formation: each replica keeps its part of the outer state (from its
  // weights when none ever began a round) and the lanes open.
  const bool fresh = disk_->state.version() == 0 && disk_->step == 0;
  if (i.shards && i.shards->form(sides(), lane_leader(), fresh).older)
    dropped_by_cut();  // replicas restarted without their disks left a hole at the newest state
  apply_faults();
  world_.checker.restarted(name_, version());  // after the cut: it may take an older state
}

void SimSite::tick() {
  if (!incarnation_ || stopped_ || drained_ || done_) return;
  Incarnation& inc = *incarnation_;
  if (inc.phase == Phase::Joining) return join();
  if (inc.leader().driver.waiting()) {
    attempt();
    if (incarnation_ && !incarnation_->leader().driver.waiting()) wait_ended();
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
  if (inc.leader().now.step >= plan_.total_steps) {
    // Its last round went out before a restart: it waits for the job's end like any site.
    inc.phase = Phase::Ending;
    return on_replicas([](RoundDriver& d, Replica&) { d.end_job(); });
  }
  if (world_.clock.now() >= inc.next_at) train_step();
}

void SimSite::join() {
  Incarnation& inc = *incarnation_;
  if (!inc.cross().poll_join(0ms)) return log_events();
  const Disk& now = inc.leader().now;
  say("joined at version " + std::to_string(now.state.version()) + ", step " + std::to_string(now.step));
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
      world_.checker.finished(name_, version(), whole_global(), inc.cross().ended_cut_off());
      say("finished at version " + std::to_string(version()));
      incarnation_.reset();  // the process exits: its lease is revoked
      return;
    case Phase::Training:
      // No site trains on past its backlog bound: at a round's end, with the control plane in
      // reach, it waits until at most one of its rounds is unmerged (a cut-off site counts none).
      if (std::exchange(inc.round_wait, false) && world_.job.overlap &&
          inc.cross().backlog(inc.leader().now.state) > RoundDriver::kMaxBacklog)
        world_.checker.fail(name_ + " trains on with " + std::to_string(inc.cross().backlog(inc.leader().now.state)) +
                            " of its rounds unmerged, past the backlog bound");
      return;
    case Phase::Joining:
      return;
  }
}

void SimSite::train_step() {
  Incarnation& inc = *incarnation_;
  const double scale = std::exchange(spike_, false) ? kSpike : 1.0;
  for (Process* p : inc.live()) p->steps.train(scale);
  const std::int64_t done = inc.leader().now.step;
  const bool last = done == plan_.total_steps;
  const bool hold = paused_outer_ && !last;
  on_replicas([&](RoundDriver& d, Replica& r) { d.after_step(r, done, last, hold); });
  inc.next_at = world_.clock.now() + world_.job.round_s / kStepsPerExchange;
  if (last) inc.phase = Phase::Ending;
  const bool round_ends = inc.leader().driver.round_ends(done);
  inc.round_wait = round_ends && !last && !hold;
  if (round_ends && (done / kStepsPerExchange) % 3 == 0) save_disk();
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
    LeaderSide& lead = *inc.leader().lead;
    const auto& f = lead.striped->figures();
    assembled_ += f.assembled - std::exchange(lead.assembled_seen, f.assembled);
    held_in_parts_ += f.held_in_parts - std::exchange(lead.held_seen, f.held_in_parts);
  } else {
    for (const auto& p : inc.replicas) {
      Replica r{p->channel, p->steps};
      call(p->driver, r);
    }
    sync_lanes();
  }
  const Process& lead = inc.leader();
  for (const Process* p : inc.live()) {
    if (p == &lead) continue;
    const bool same_global = inc.shards || OuterState::weights_hash(lead.now.state.global()) ==
                                               OuterState::weights_hash(p->now.state.global());
    const std::string differ = lead.now.local != p->now.local                 ? "working weights"
                               : lead.driver.waiting() != p->driver.waiting() ? "waits"
                               : !same_global                                 ? "outer weights"
                                                                              : "";
    if (lead.now.state.version() != p->now.state.version() || lead.now.step != p->now.step || !differ.empty())
      world_.checker.fail(name_ + "'s replicas differ: the leader at version " +
                          std::to_string(lead.now.state.version()) + " step " + std::to_string(lead.now.step) +
                          ", another at version " + std::to_string(p->now.state.version()) + " step " +
                          std::to_string(p->now.step) + (differ.empty() ? "" : ", their " + differ + " differ"));
  }
  if (inc.shards && !mirrors_hold()) world_.checker.fail(name_ + "'s mirrors differ from the parts they mirror");
  check_weights();
}

void SimSite::sync_lanes() {
  Incarnation& inc = *incarnation_;
  LeaderSide& lead = *inc.replicas[0]->lead;
  if (!lead.striped) return;
  Lane& lane = *inc.replicas[1]->lane;
  auto peer_lanes = lead.cross->peer_lanes();
  std::set<std::string> peers;
  for (const auto& [address, peer] : peer_lanes) {
    peers.insert(address);
    peers.insert(peer.lanes.begin(), peer.lanes.end());
  }
  lead.striped->set_peer_lanes(std::move(peer_lanes));
  lane.set_peers(std::move(peers));
  for (const auto& order : lead.striped->take_orders()) lane.carry(order);
  for (auto& [from, bytes] : lane.take_stripes()) lead.striped->feed(from, bytes);
  const auto assembled = lead.striped->figures().assembled;
  assembled_ += assembled - std::exchange(lead.assembled_seen, assembled);
}

SimShards::Sides SimSite::sides() {
  SimShards::Sides sides;
  const auto& replicas = incarnation_->replicas;
  for (std::size_t r = 0; r < replicas.size(); ++r)
    if (Process* p = replicas[r].get())
      sides.push_back(SimShards::Side{static_cast<int>(r), p->driver, p->steps, p->now.state});
  return sides;
}

LaneLeader SimSite::lane_leader() {
  LeaderSide& lead = *incarnation_->leader().lead;
  return {lead.cross.get(), lead.striped};
}

void SimSite::refetch(const PartsNotKept& e) {
  Incarnation& inc = *incarnation_;
  ++refetches_;
  say(std::string("its replicas let go of the deltas held in parts: ") + e.what());
  inc.cross().drop_held_in_parts();
  if (inc.phase == Phase::Draining) inc.drain_asked = true;
  inc.phase = Phase::CatchingUp;
  inc.shards->run(sides(), lane_leader(), [](RoundDriver& d, Replica&) { d.catch_up(); });
}

void SimSite::regroup(const Error& e) {
  ++regroups_;
  say(std::string("its replicas re-formed their group: ") + e.what());
  reform();
}

void SimSite::save_disk() {
  Incarnation& inc = *incarnation_;
  if (!inc.cross().may_checkpoint(inc.leader().now.state)) return;  // the last sound one stays
  *disk_ = inc.leader().now;
  disk_writer_ = static_cast<int>(inc.leader_index());
  for (std::size_t r = 0; r < part_disks_.size(); ++r)
    if (const auto& p = inc.replicas[r]) part_disks_[r] = p->now;  // a dead one's disk stays
  inc.cross().durable(disk_->state.version());
}

void SimSite::renew_lease() {
  if (!incarnation_ || stopped_ || world_.job.mutations.never_renew_lease) return;
  LeaderSide& lead = *incarnation_->leader().lead;
  const auto lease = lead.lease.lock();
  if (!lease || lease->lost) return;
  try {
    lead.control->keep_alive(lease->id);
  } catch (const EtcdLeaseGone&) {
    lease->lost = true;
  } catch (const Error&) {
    // Not renewed this beat: tried again at the next.
  }
}

void SimSite::crash() {
  if (!incarnation_) return;
  say("crashed");
  for (Process* p : incarnation_->live())
    if (p->lead) p->lead->control->faults().down = true;  // a dead process revokes nothing: its lease lapses
  incarnation_.reset();
  drained_ = false;  // the operator's mode lives in the process
}

void SimSite::restart(bool lose_disk) {
  if (incarnation_ || done_) return;
  say(lose_disk ? "restarted without its disk" : "restarted from its disk");
  if (lose_disk) {
    journal_ = std::make_shared<MemoryDeltaJournal>();
    *disk_ = initial_disk();
    disk_writer_ = 0;
    for (auto& d : part_disks_) d = *disk_;
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
  for (Process* p : incarnation_->live()) {
    if (p->lane) world_.network.isolate(p->lane->address(), cut_);
    if (!p->lead) continue;
    world_.network.isolate(p->lead->link->address(), cut_);
    ControlFaults& f = p->lead->control->faults();
    f.down = cut_ || world_.faults.outages > 0;
    f.lost_reply = world_.faults.lost_reply.contains(name_) ? world_.faults.lost_reply.at(name_) : 0;
    f.slow_reply_s = world_.faults.slow_reply_s.contains(name_) ? world_.faults.slow_reply_s.at(name_) : 0;
    f.late_write = world_.faults.late_write.contains(name_) ? world_.faults.late_write.at(name_) : 0;
  }
  if (const auto& shards = incarnation_->shards)
    for (const auto& address : shards->lane_addresses()) world_.network.isolate(address, cut_);
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
  if (incarnation_->cross().job_over()) {
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
    incarnation_->cross().set_proposing(!paused);
    for (Process* p : incarnation_->live()) p->driver.pause(paused);
  }
  say(paused ? "pause-outer" : "resume-outer");
}

void SimSite::rollback() {
  if (!incarnation_) return;
  say("rollback asked");
  incarnation_->rollback_asked = true;
}

void SimSite::roll_back() {
  for (Process* p : incarnation_->live())  // what the rollback drops
    std::fill(p->now.progress.begin(), p->now.progress.end(), 0.0f);
  on_replicas([](RoundDriver& driver, Replica& r) { driver.roll_back(r.training, r.parts); });
  say("rollback to version " + std::to_string(version()));
}

void SimSite::spike() {
  if (!incarnation_) return;
  spike_ = true;
  say("spike: its next step is " + std::to_string(static_cast<int>(kSpike)) + " times the usual");
}

void SimSite::flip_outer(double where) {
  if (!incarnation_) return;
  MERIDIAN_CHECK(!incarnation_->shards, "the simulator flips bits of whole outer states only");
  const std::size_t size = incarnation_->leader().now.state.size();
  const std::size_t at = std::min(size - 1, static_cast<std::size_t>(where * static_cast<double>(size)));
  for (Process* p : incarnation_->live()) {
    auto* value = const_cast<float*>(p->now.state.global().data()) + at;  // a fault in the hardware's memory
    std::uint32_t bits;
    std::memcpy(&bits, value, sizeof bits);
    bits ^= 1u << 3;
    std::memcpy(value, &bits, sizeof bits);
  }
  say("bit 3 of outer weight " + std::to_string(at) + " flipped");
}

std::int64_t SimSite::version() const { return incarnation_ ? incarnation_->leader().now.state.version() : -1; }
std::int64_t SimSite::disk_version() const { return disk_->state.version(); }

std::string SimSite::describe() const {
  std::string s = name_;
  if (done_) return s + " done";
  if (!incarnation_) return s + " down";
  const Disk& d = incarnation_->leader().now;
  s += " version " + std::to_string(d.state.version()) + " step " + std::to_string(d.step);
  if (stopped_) s += " stopped";
  if (drained_) s += " drained";
  if (cut_) s += " cut off";
  return s + ", waiting for " + incarnation_->cross().describe_wait();
}

}  // namespace meridian
