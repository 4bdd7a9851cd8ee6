#include "sim/protocol/sim_site.hpp"

#include <algorithm>
#include <sstream>

#include "core/util/hash.hpp"
#include "core/util/rng.hpp"
#include "sim/protocol/mutant_seams.hpp"
#include "transport/chunking/chunker.hpp"

namespace meridian {
namespace {

using namespace std::chrono_literals;

// What one half of a round of training adds to a site's weights: fixed by (seed, site, round, half).
std::vector<float> synthetic_progress(std::uint64_t seed, const std::string& site, std::int64_t round, int half,
                                      std::size_t n) {
  Rng rng = Rng::derive(seed ^ hash64(std::as_bytes(std::span(site.data(), site.size()))),
                        static_cast<std::uint64_t>(round) * 2 + static_cast<std::uint64_t>(half));
  std::vector<float> step(n);
  for (auto& x : step) x = static_cast<float>(0.01 * (rng.uniform() - 0.5));
  return step;
}

}  // namespace

std::vector<float> sim_initial_weights(std::size_t n) {
  std::vector<float> w(n);
  for (std::size_t i = 0; i < n; ++i) w[i] = 0.5f - 0.03f * static_cast<float>(i % 29);
  return w;
}

struct SimSite::Lease {
  std::int64_t id = 0;
  bool lost = false;
};

namespace {
class KeptSimLease final : public KeptLease {
 public:
  explicit KeptSimLease(std::shared_ptr<bool> lost) : lost_(std::move(lost)) {}
  bool lost() const override { return *lost_; }

 private:
  std::shared_ptr<bool> lost_;
};
}  // namespace

// What a checkpoint holds: the state after the site's latest version or delta.
struct SimSite::Disk {
  OuterState state;
  std::vector<float> local, progress;
  std::int64_t round = 0;
  int half = 0;
  int span = 0;  // rounds trained since the last delta sent (more than one while the outer exchange is paused)
};

struct SimSite::Incarnation {
  std::unique_ptr<MemoryControlPlane> control;
  std::unique_ptr<ControlPlane> overwriting;  // SimMutations::overwrite_commits: what CrossSite talks to
  std::unique_ptr<Link> link;
  std::optional<CommitRecord> adopted;  // SimMutations::reapply_adopted: handed out again as a commit
  std::weak_ptr<Lease> lease;
  Disk now;
  double next_at = 0;  // when the next half round of training ends
  bool joined = false, fast_forward = false, waiting_merge = false, draining = false;
  std::unique_ptr<CrossSite> cross;  // last: it goes first, while its control plane and link are still there
};

SimSite::SimSite(SimWorld& world, std::string name) : world_(world), name_(std::move(name)) {
  const auto w = sim_initial_weights(world_.job.params);
  disk_ = std::make_unique<Disk>(Disk{OuterState(w, world_.job.outer, CodecOptions{CodecKind::Fp32}, false), w,
                                      std::vector<float>(w.size()), 0, 0, 0});
  start(*disk_);
}

SimSite::~SimSite() = default;

void SimSite::say(const std::string& what) const {
  if (!world_.trace) return;
  std::ostringstream out;
  out.precision(3);
  out << std::fixed << world_.clock.now() << " " << name_ << ": " << what;
  world_.trace(out.str());
}

void SimSite::start(const Disk& disk) {
  ++incarnations_;
  auto inc = std::make_unique<Incarnation>(
      Incarnation{nullptr, nullptr, nullptr, std::nullopt, {}, disk, 0, false, false, false, false, nullptr});
  const SimMutations& mutations = world_.job.mutations;
  inc->control = std::make_unique<MemoryControlPlane>(world_.store, world_.clock, world_.job.seed * 131 + incarnations_);
  if (mutations.overwrite_commits) inc->overwriting = std::make_unique<OverwritingControlPlane>(*inc->control);
  inc->link = world_.network.open("sim://" + name_ + "/" + std::to_string(incarnations_));
  if (mutations.equivocation.first == name_) {
    const std::string victim = "sim://" + mutations.equivocation.second + "/";
    inc->link = std::make_unique<ForgingLink>(std::move(inc->link),
                                              [victim](const std::string& address) { return address.starts_with(victim); });
  }
  CrossSiteOptions o = world_.job.cross;
  o.job = world_.job.name;
  o.site = name_;
  o.sites = world_.job.sites;
  o.journal = journal_;
  o.incarnation = Rng::derive(world_.job.seed, incarnations_ * 1000 + static_cast<std::uint64_t>(name_[0])).next_u64() | 1;
  Incarnation* raw = inc.get();
  o.keep_lease = [raw](std::int64_t id) {
    auto lease = std::make_shared<Lease>(Lease{id, false});
    raw->lease = lease;
    return std::make_unique<KeptSimLease>(std::shared_ptr<bool>(lease, &lease->lost));
  };
  ControlPlane& control = inc->overwriting ? *inc->overwriting : *inc->control;
  inc->cross = std::make_unique<CrossSite>(std::move(o), control, *inc->link, [this] { return world_.clock.now(); });
  inc->cross->serve_state(&inc->now.state);
  if (paused_outer_) inc->cross->set_proposing(false);
  incarnation_ = std::move(inc);
  apply_faults();
  world_.checker.restarted(name_, disk.state.version());
}

void SimSite::tick() {
  if (!incarnation_ || stopped_ || drained_ || done_) return;
  Incarnation& inc = *incarnation_;
  if (!inc.joined) return join();
  for (int i = 0; i < 4; ++i) {
    std::optional<CrossSite::Commit> commit;
    if (inc.adopted)
      commit = CrossSite::Commit{*std::exchange(inc.adopted, std::nullopt), std::vector<float>(world_.job.params), {}, {0}};
    else
      commit = inc.cross->poll_commit(inc.now.state, 0ms);
    log_events();
    if (!commit) break;
    apply(*commit);
    if (world_.job.mutations.reapply_adopted && !commit->snapshot.empty()) inc.adopted = commit->record;
  }
  if (inc.now.round >= world_.job.rounds) return finish();
  if (inc.waiting_merge || inc.draining) {
    if (inc.cross->backlog(inc.now.state) > 0) return;
    inc.waiting_merge = false;
    if (std::exchange(inc.draining, false)) {
      inc.cross->leave();
      drained_ = true;
      say("drained: left the job");
      return;
    }
    inc.next_at = world_.clock.now() + world_.job.round_s / 2;
  }
  if (world_.clock.now() >= inc.next_at) train_half();
}

void SimSite::join() {
  Incarnation& inc = *incarnation_;
  if (!inc.cross->poll_join(0ms)) return log_events();
  inc.joined = true;
  inc.now.round = std::max(inc.now.round, inc.cross->next_round());
  // Like a resumed or disk-less site, it takes up the job where the others are (fast_forward).
  if (std::exchange(inc.fast_forward, false))
    inc.now.round = std::max(inc.now.round, std::min(inc.cross->peers_newest_round(), world_.job.rounds - 1));
  inc.next_at = world_.clock.now() + world_.job.round_s / 2;
  say("joined at version " + std::to_string(inc.now.state.version()) + ", round " + std::to_string(inc.now.round));
}

void SimSite::train_half() {
  Incarnation& inc = *incarnation_;
  const auto step = synthetic_progress(world_.job.seed, name_, inc.now.round, inc.now.half, world_.job.params);
  for (std::size_t i = 0; i < step.size(); ++i) {
    inc.now.local[i] -= step[i];
    inc.now.progress[i] += step[i];
  }
  inc.next_at = world_.clock.now() + world_.job.round_s / 2;
  if (++inc.now.half == 2) end_round();
}

void SimSite::end_round() {
  Incarnation& inc = *incarnation_;
  Disk& d = inc.now;
  d.half = 0;
  ++d.span;
  const bool final = d.round == world_.job.rounds - 1;
  if (paused_outer_ && !final) {
    ++d.round;  // carried into the next round that is sent
    return;
  }
  auto bytes = d.state.encode_delta(d.local);
  const DeltaAnnouncement a{name_, d.round, d.state.version(), 1000, bytes.size(), sha256(bytes), final, 0, d.span};
  world_.checker.submitted(name_, d.round, bytes, d.progress);
  std::fill(d.progress.begin(), d.progress.end(), 0.0f);
  auto hashes = chunk_hashes(bytes, inc.cross->chunk_bytes());
  inc.cross->submit(a, std::move(bytes), std::move(hashes));
  say("sent round " + std::to_string(d.round) + (final ? " (final)" : "") + " on version " + std::to_string(a.base_version));
  ++d.round;
  d.span = 0;
  inc.waiting_merge = !world_.job.overlap;
  if (d.round % 3 == 0) save_disk();
}

void SimSite::apply(CrossSite::Commit& commit) {
  Incarnation& inc = *incarnation_;
  OuterState& state = inc.now.state;
  const CommitRecord& record = commit.record;
  if (!commit.snapshot.empty()) {
    try {
      state.adopt(commit.snapshot, record.params_hash, inc.now.local);
    } catch (const Error& e) {
      world_.checker.fail(name_ + " could not adopt a snapshot CrossSite had verified: " + e.what());
      return;
    }
    world_.checker.applied(name_, record, OuterState::weights_hash(state.global()), true);
    say("adopted a peer's state of version " + std::to_string(record.number));
  } else {
    if (record.number != state.version() + 1) {
      world_.checker.applied(name_, record, 0, false);  // out of order: the checker says how
      return;
    }
    auto outcome = state.preview(commit.fragments, commit.mean_delta);
    if (outcome.hash != record.params_hash)
      world_.checker.fail(name_ + "'s weights of version " + std::to_string(record.number) + " do not hash as its record says");
    const std::uint64_t hash = outcome.hash;
    state.commit(record.number, std::move(outcome));
    if (world_.job.mutations.skip_rebase)  // rebased from the wrong start: the round's progress is dropped
      std::copy(state.start().begin(), state.start().end(), inc.now.local.begin());
    state.rebase(inc.now.local);
    world_.checker.applied(name_, record, hash, false);
    std::string merged;
    for (const auto& e : record.entries) merged += " " + e.site + std::to_string(e.round) + "@" + std::to_string(e.base_version);
    say("applied version " + std::to_string(record.number) + " from " + record.proposer + ":" + merged);
  }
}

void SimSite::finish() {
  Incarnation& inc = *incarnation_;
  if (!inc.cross->finished(inc.now.state)) return log_events();
  log_events();
  done_ = true;
  world_.checker.finished(name_, inc.now.state.version(), inc.now.state.global());
  say("finished at version " + std::to_string(inc.now.state.version()));
  incarnation_.reset();  // the process exits: its lease is revoked
}

void SimSite::save_disk() {
  *disk_ = incarnation_->now;
  incarnation_->cross->durable(disk_->state.version());
}

void SimSite::log_events() {
  for (const auto& e : incarnation_->cross->take_events())
    say("event " + e.kind + (e.site.empty() ? "" : " " + e.site) + " " + std::to_string(e.number) + " " + e.detail);
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
    const auto w = sim_initial_weights(world_.job.params);
    *disk_ = Disk{OuterState(w, world_.job.outer, CodecOptions{CodecKind::Fp32}, false), w,
                  std::vector<float>(w.size()), 0, 0, 0};
  }
  start(*disk_);
  incarnation_->fast_forward = lose_disk;
}

void SimSite::cut_off(bool cut) {
  cut_ = cut;
  apply_faults();
}

void SimSite::apply_faults() {
  if (!incarnation_) return;
  world_.network.isolate(incarnation_->link->address(), cut_);
  ControlFaults& f = incarnation_->control->faults();
  f.down = cut_ || world_.faults.outages > 0;
  f.lost_reply = world_.faults.lost_reply.contains(name_) ? world_.faults.lost_reply.at(name_) : 0;
  f.slow_reply_s = world_.faults.slow_reply_s.contains(name_) ? world_.faults.slow_reply_s.at(name_) : 0;
  f.late_write = world_.faults.late_write.contains(name_) ? world_.faults.late_write.at(name_) : 0;
}

void SimSite::drain() {
  if (!incarnation_ || drained_) return;
  say("drain");
  incarnation_->draining = true;
}

void SimSite::resume() {
  if (!incarnation_) return;
  if (!drained_) {
    incarnation_->draining = false;
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
  incarnation_->joined = false;
  incarnation_->fast_forward = true;
}

void SimSite::pause_outer(bool paused) {
  paused_outer_ = paused;
  if (incarnation_) incarnation_->cross->set_proposing(!paused);
  say(paused ? "pause-outer" : "resume-outer");
}

void SimSite::rollback() {
  if (!incarnation_) return;
  Disk& d = incarnation_->now;
  d.state.drop_in_flight(d.local);
  std::fill(d.progress.begin(), d.progress.end(), 0.0f);
  say("rollback to version " + std::to_string(d.state.version()));
}

std::int64_t SimSite::version() const { return incarnation_ ? incarnation_->now.state.version() : -1; }
std::int64_t SimSite::disk_version() const { return disk_->state.version(); }

std::string SimSite::describe() const {
  std::string s = name_;
  if (done_) return s + " done";
  if (!incarnation_) return s + " down";
  const Disk& d = incarnation_->now;
  s += " version " + std::to_string(d.state.version()) + " round " + std::to_string(d.round);
  if (stopped_) s += " stopped";
  if (drained_) s += " drained";
  if (cut_) s += " cut off";
  return s + ", waiting for " + incarnation_->cross->describe_wait();
}

}  // namespace meridian
