#include "sites/replica/replica_loop.hpp"

#include <omp.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <chrono>
#include <cmath>
#include <thread>
#include <type_traits>

#include "core/device/cuda_probe.hpp"
#include "core/runlog/run_log.hpp"
#include "core/train/divergence_guard.hpp"
#include "core/train/trainer.hpp"
#include "core/util/error.hpp"
#include "core/util/hash.hpp"
#include "sync/comm/tcp_store.hpp"
#include "sync/group/protocol.hpp"
#include "sync/group/replica_group.hpp"
#include "sync/group/sdc_guard.hpp"
#include "sync/group/state_sync.hpp"
#include "sites/replica/ops_inbox.hpp"
#include "sites/replica/site_exchange.hpp"
#include "sites/replica/time_breakdown.hpp"
#include "sites/replica/site_mode.hpp"
#include "sync/parallel/bucket_reducer.hpp"

namespace meridian {
namespace {

// Bumps hb/<id> from its own thread and store connection, so a replica blocked in a collective
// still shows as alive, and a stopped (SIGSTOP) or dead one stops showing.
class Heartbeat {
 public:
  Heartbeat(const std::string& endpoint, int id, std::chrono::milliseconds every)
      : thread_([this, endpoint, id, every] {
          TcpStoreClient store(endpoint);
          while (!stop_) {
            try {
              store.add(site_keys::heartbeat(id), 1);
            } catch (const Error&) {
              // The agent may be restarting its store; the next beat retries.
            }
            std::unique_lock lock(mu_);
            cv_.wait_for(lock, every, [this] { return stop_.load(); });
          }
        }) {}
  ~Heartbeat() {
    stop_ = true;
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
};

// Micro-batches per step for a group of `world`: keep_batch keeps the global batch of the full
// site (count x grad_accum micro-batches) when it divides evenly, otherwise rounds up and says so.
int micro_batches_for(const JobConfig& c, int world) {
  if (c.replicas.on_failure == JobConfig::Replicas::OnFailure::Scale) return c.inner.grad_accum;
  const int total = c.replicas.count * c.inner.grad_accum;
  return std::max(1, (total + world - 1) / world);
}

// SIGTERM (the agent stopping the site) and SIGINT, handled on their own thread: the site gives
// up its membership first, so peers stop waiting for it at once rather than after the lease's TTL,
// then the process ends as the signal would have ended it.
class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGINT);
    ::pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  }
  ~StopSignals() {
    if (!thread_.joinable()) return;
    ::pthread_kill(thread_.native_handle(), SIGUSR2);  // wakes sigwait below, which then returns
    thread_.join();
  }
  void on_stop(std::function<void()> leave) {
    sigaddset(&set_, SIGUSR2);
    ::pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    thread_ = std::thread([this, leave = std::move(leave)] {
      int sig = 0;
      if (::sigwait(&set_, &sig) != 0 || sig == SIGUSR2) return;
      leave();
      ::signal(sig, SIG_DFL);
      sigset_t only;
      sigemptyset(&only);
      sigaddset(&only, sig);
      ::pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
      ::raise(sig);
    });
  }

 private:
  sigset_t set_;
  std::thread thread_;
};

// What the group leader publishes for the site's metrics endpoint (site_keys::figures()), and the
// counts behind it over the life of this process.
class OpsFigures {
 public:
  explicit OpsFigures(double now) : started_(now), last_t_(now) {}
  void joined(double seconds) {
    if (joins_++ > 0) ++heals_;
    last_join_s_ = seconds;
  }
  void computed(double step_s) {
    ++computed_;
    step_s_ = step_s;
  }
  void discarded(std::int64_t steps) { discarded_ += steps; }
  void sdc_finding() { ++sdc_findings_; }

  void publish(Store& store, const SiteExchange& exchange, Trainer& trainer, const StepResult& r,
               double computing_s, double now) {
    nlohmann::json f = exchange.ops_figures(trainer.param_count());
    const auto& state = trainer.state();
    f.update({{"step", state.step},
              {"loss", r.loss},
              {"lr", r.lr},
              {"lr_scale", state.lr_scale},
              {"rollbacks", state.rollbacks},
              {"tokens", state.tokens},
              {"tok_s", (state.tokens - last_tokens_) / std::max(1e-9, now - last_t_)},
              {"step_s", step_s_},
              {"utilization", computing_s / std::max(1e-9, now - started_)},
              {"goodput", computed_ > 0 ? static_cast<double>(computed_ - discarded_) / computed_ : 1.0},
              {"heals", heals_},
              {"heal_s", last_join_s_},
              {"sdc_findings", sdc_findings_}});
    // A rollback moves tokens back: the rate restarts from there rather than going negative.
    last_tokens_ = state.tokens;
    last_t_ = now;
    const std::string text = f.dump();
    store.set(site_keys::figures(), std::as_bytes(std::span(text.data(), text.size())));
  }

 private:
  double started_, last_t_;
  std::int64_t last_tokens_ = 0;
  std::int64_t joins_ = 0, heals_ = 0, computed_ = 0, discarded_ = 0, sdc_findings_ = 0;
  double last_join_s_ = 0, step_s_ = 0;
};

// Where this replica computes: its site's device; the replicas of a GPU site take the machine's
// GPUs in turn by replica id. NCCL wants a GPU of its own per rank, so a site with more replicas
// than GPUs all-reduces over Gloo instead.
struct Placement {
  ComputeDevice device;
  bool nccl = false;
};

Placement placement(const JobConfig& c, const std::string& site, int replica) {
  for (const auto& s : c.sites) {
    if (s.name != site || s.device != JobConfig::Site::Device::Cuda) continue;
    const int gpus = std::max(1, cuda_device_count());
    return {{s.device, s.precision, s.attention, replica % gpus, {}}, s.replicas <= gpus};
  }
  return {};
}

bool is_peer_failure(const Error& e) { return e.kind() == ErrorKind::Peer || e.kind() == ErrorKind::Timeout; }

}  // namespace

int run_replica(const ReplicaRun& run, Env& env, std::function<double()> now) {
  const JobConfig& c = run.config;
  // The replicas of a CPU site share this machine's cores: OpenMP teams larger than a replica's
  // share spin against each other at every barrier (3 replicas x 2 threads on 2 cores ran ~10x
  // slower). An explicit OMP_NUM_THREADS from the launcher wins.
  if (std::getenv("OMP_NUM_THREADS") == nullptr)
    omp_set_num_threads(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / c.replicas.count));
  StopSignals stop_signals;  // first, so every thread started below inherits the blocked mask
  const double t_start = now();  // before the data is loaded: start-up counts from here
  TimeBreakdown times(t_start);
  using Part = TimeBreakdown::Part;
  // Times `f` into `part`; what it returns is passed on.
  const auto timed = [&](Part part, auto&& f) {
    const double t0 = now();
    if constexpr (std::is_void_v<decltype(f())>) {
      f();
      times.add(part, now() - t0);
    } else {
      auto out = f();
      times.add(part, now() - t0);
      return out;
    }
  };
  RunLog log(c.job.run_dir);
  TcpStoreClient store(run.store_endpoint);
  Heartbeat heartbeat(run.store_endpoint, run.id,
                      std::chrono::milliseconds(std::max(1, c.replicas.heartbeat_timeout_ms / 5)));
  const Placement place = placement(c, run.site, run.id);
  Trainer trainer(c, env, log, nullptr, now, {}, place.device);
  SiteExchange exchange(c, run.site, trainer.model().params(), log, now);
  stop_signals.on_stop([&] { exchange.leave(); });
  if (exchange.active())
    trainer.set_extras({[&](Checkpoint& out) { exchange.save(out); },
                        [&](const Checkpoint& in) { exchange.restore(in); }});
  OpsFigures figures(t_start);
  SiteMode mode(store);
  bool is_leader = false;  // of the group joined last: the one that publishes the mode
  OpsInbox inbox(store, env, [&](const std::string& kind, nlohmann::json& result) {
    mode.command(kind, result);
    if (!result.contains("error")) mode.publish(is_leader, {{"step", trainer.state().step}});
  });
  bool job_over = false;  // drained when the other sites finished the job
  std::int64_t ops_newest = 0;  // the newest operator command, as the step's all-reduce said
  trainer.try_resume();
  GlooOptions gloo;
  gloo.timeout = std::chrono::milliseconds(c.replicas.collective_timeout_ms);
  ReplicaGroup group(store, run.id, gloo, place.nccl ? std::optional<int>(place.device.index) : std::nullopt);
  const auto join_timeout = std::chrono::milliseconds(20 * std::max(c.replicas.heartbeat_timeout_ms,
                                                                     c.replicas.collective_timeout_ms));
  std::optional<std::int64_t> next_generation;  // none: this process has not joined yet
  bool switch_pending = false;
  SdcGuard sdc;
  // Across sites (DiLoCo, [guard] across_sites) a diverged site goes back to the newest version it
  // holds, alone: the versions and rounds the sites share stay. Otherwise the guard only reports
  // there, and a non-finite step still ends the run; the operator can still force the rollback.
  const bool versions = exchange.active() && !exchange.synchronous();
  const auto guard_mode = !exchange.active()                  ? DivergenceGuard::Mode::Recover
                          : versions && c.guard.across_sites ? DivergenceGuard::Mode::RecoverToVersion
                                                              : DivergenceGuard::Mode::DetectOnly;
  DivergenceGuard::ToVersion to_version;
  if (versions)
    to_version = [&](Trainer& t) {
      auto fields = exchange.roll_back(t);
      figures.discarded(fields["discarded_steps"].get<std::int64_t>());
      return fields;
    };
  DivergenceGuard guard(c.guard, guard_mode, log, {{"site", run.site}, {"replica", run.id}}, std::move(to_version));
  inbox.on_version_rollback([&](Trainer& t, std::int64_t version, std::optional<double> scale) {
    if (!versions)
      throw make_error(ErrorKind::Usage, "rollback --to v", version, ": ",
                       exchange.active() ? "a synchronous job has no versions of its own to go back to"
                                         : "a one-site job has no versions");
    if (version != exchange.state().version())
      throw make_error(ErrorKind::Usage, "rollback --to v", version, ": this site holds version ",
                       exchange.state().version(),
                       version < exchange.state().version()
                           ? " (going back to an older version would revert the whole job, which meridian does not do)"
                           : " (not that one yet)");
    return guard.force_rollback(t, scale.value_or(t.state().lr_scale));
  });
  while (true) {
    const double t_join = now();
    const bool rejoin = times.training_began();
    group.join(next_generation, join_timeout);
    const int accum = micro_batches_for(c, group.size());
    ReplicaSlot slot;
    slot.rank = group.rank();
    slot.world = group.size();
    if (exchange.active()) {  // every replica of every site reads its own windows
      slot.rank = exchange.data_offset() + std::min(group.rank(), c.replicas.count - 1);
      slot.world = exchange.data_replicas();
    }
    const bool leader = group.rank() == 0;
    is_leader = leader;
    std::unique_ptr<BucketReducer> overlap;
    if (c.replicas.overlap_allreduce && group.size() > 1) {
      overlap = std::make_unique<BucketReducer>(group.comm());
      slot.bucket_ready = [&overlap](std::span<float> bucket) { overlap->enqueue(bucket); };
    }
    // One collective for the gradients (or the buckets already in flight), one tiny one for the
    // loss and the "a newer generation is published" flag, so every member decides to switch
    // after the same step.
    slot.reduce = [&](std::span<float> grads, double& loss) {
      if (overlap) overlap->wait();
      else group.comm().allreduce(grads, ReduceOp::Mean);
      float control[3] = {static_cast<float>(loss), group.newer_generation_published() ? 1.0f : 0.0f,
                          inbox.newest(leader)};
      group.comm().allreduce(std::span<float>(control, 3), ReduceOp::Sum);
      loss = control[0] / static_cast<float>(group.size());
      switch_pending = control[1] > 0;
      ops_newest = static_cast<std::int64_t>(control[2]);
      if (exchange.active() && exchange.synchronous())
        exchange.reduce_across_sites(group.comm(), leader, trainer.state().step, grads, loss);
    };
    trainer.set_slot(std::move(slot), accum);
    switch_pending = false;
    try {
      const auto heal = sync_state(group.comm(), trainer);
      log.event("joined", {{"site", run.site},
                           {"replica", run.id},
                           {"generation", group.generation().number},
                           {"rank", group.rank()},
                           {"size", group.size()},
                           {"grad_accum", accum},
                           {"global_batch", accum * group.size() * c.inner.batch_per_replica},
                           {"step", heal.step},
                           {"heal_source_rank", heal.source_rank},
                           {"heal_bytes", heal.bytes},
                           {"healed", heal.changed},
                           {"ms", 1000 * (now() - t_join)}});
      mode.agree(group.comm(), leader);
      exchange.pause_outer(mode.outer_paused());
      if (mode.state() != SiteMode::State::Drained) exchange.join(group.comm(), leader, trainer);
      guard.reset(trainer, leader);
      figures.joined(now() - t_join);
      // Each member's applied command count (+1; 0: a fresh replica) at its rank, the filed count
      // last: one sum gathers them all.
      std::vector<float> counts(static_cast<std::size_t>(group.size()) + 1, 0.0f);
      if (const auto a = inbox.applied()) counts[static_cast<std::size_t>(group.rank())] = static_cast<float>(*a + 1);
      counts.back() = inbox.newest(leader);
      group.comm().allreduce(std::span<float>(counts), ReduceOp::Sum);
      std::vector<std::optional<std::int64_t>> applied;
      for (std::size_t r = 0; r + 1 < counts.size(); ++r)
        applied.push_back(counts[r] > 0 ? std::optional(static_cast<std::int64_t>(counts[r]) - 1) : std::nullopt);
      inbox.skip_to(OpsInbox::resume_after(applied, static_cast<std::int64_t>(counts.back())));
      // Operator commands up to `newest`, in the order filed; true when one replaced the trainer's state.
      const auto apply_commands = [&](std::int64_t newest) {
        const auto applied = inbox.apply(newest, trainer, leader);
        for (auto done : applied.done)
          if (leader) {
            done.update({{"site", run.site}, {"replica", run.id}, {"version", exchange.state().version()}});
            log.event("ops_applied", std::move(done));
          }
        exchange.pause_outer(mode.outer_paused());
        return applied.restored;
      };
      // Drained: the group sits the job out until the operator resumes it (then it comes back
      // as a site that was away does), it regroups, or the other sites end the job.
      const auto sit_out = [&] {
        const double t_drained = now();
        const auto from_version = exchange.state().version();
        const auto from_step = trainer.state().step;
        const ParkHooks hooks{[&] { return group.newer_generation_published(); },
                              [&] { return static_cast<std::int64_t>(inbox.newest(leader)); },
                              [&](std::int64_t newest) {
                                if (apply_commands(newest)) guard.reset(trainer, leader);
                              },
                              [&] { return exchange.job_over(); }};
        switch (park(group.comm(), leader, mode, hooks)) {
          case Parked::Regroup: switch_pending = true; return;
          case Parked::JobOver:
            if (leader) log.event("drain_job_over", {{"site", run.site}, {"replica", run.id}, {"step", from_step},
                                                     {"version", from_version}, {"drained_s", now() - t_drained}});
            job_over = true;
            return;
          case Parked::Resumed: break;
        }
        exchange.rejoin(group.comm(), leader, trainer);
        const nlohmann::json detail = {{"site", run.site}, {"replica", run.id}, {"from_step", from_step},
                                       {"step", trainer.state().step}, {"from_version", from_version},
                                       {"version", exchange.state().version()}, {"drained_s", now() - t_drained}};
        mode.resumed(leader, detail);
        if (leader) log.event("resumed", detail);
      };
      if (rejoin) times.add(Part::Rejoin, now() - t_join);
      if (mode.state() == SiteMode::State::Drained) sit_out();
      while (trainer.state().step < c.inner.steps && !switch_pending && !job_over) {
        const double t_step = now();
        times.training_begins(t_step);
        StepResult r;
        try {
          r = trainer.step();
          const double step_s = now() - t_step;
          times.add(Part::Steps, step_s);
          figures.computed(step_s);
        } catch (const Error& e) {
          if (!is_peer_failure(e)) throw;
          log.event("collective_failed", {{"site", run.site},
                                          {"replica", run.id},
                                          {"generation", group.generation().number},
                                          {"step", trainer.state().step},
                                          {"error", e.what()},
                                          {"ms", 1000 * (now() - t_step)}});
          throw;
        }
        if (c.guard.enabled) {
          // Across sites the steps go on (only the weights went back): the round still ends on time.
          if (guard.after_step(trainer, r) == DivergenceGuard::Outcome::RolledBack &&
              guard_mode == DivergenceGuard::Mode::Recover) {
            figures.discarded(r.step + 1 - trainer.state().step);
            continue;
          }
        } else if (!std::isfinite(r.loss)) {
          throw make_error(ErrorKind::Data, "replica ", run.id, ": non-finite loss at step ", r.step);
        }
        if (apply_commands(ops_newest)) {
          guard.reset(trainer, leader);
          continue;
        }
        const auto done = trainer.state().step;
        if (leader && (done % c.log.every == 0 || done == c.inner.steps))
          timed(Part::Log, [&] {
            const double computing_s = times.seconds(Part::Steps);
            if (c.ops.metrics) figures.publish(store, exchange, trainer, r, computing_s, now());
            log.metric({{"time", unix_time_now()}, {"site", run.site}, {"replica", run.id}, {"step", done},
                        {"version", exchange.state().version()}, {"generation", group.generation().number},
                        {"loss", r.loss}, {"lr", r.lr}, {"tokens", trainer.state().tokens},
                        {"utilization", computing_s / std::max(1e-9, now() - t_start)}});
          });
        const bool last = done == c.inner.steps;
        const bool draining = mode.state() == SiteMode::State::Draining && !last;
        {
          // The exchange's own clocks split its calls into waits on other sites, applied versions
          // and the rest: a round end's encoding and sending, or the per-step look.
          const double t0 = now(), waited0 = exchange.waited_s(), applied0 = exchange.applied_s();
          const bool round_end = exchange.round_ends(done);
          if (round_end) {
            const std::int64_t in_round = (done - 1) % exchange.inner_steps() + 1;
            // Paused, a round's steps go into the next round sent. The last round is always sent (so
            // every site ends on one version), and so is a draining site's.
            if (mode.outer_paused() && !last && !draining) {
              exchange.skip_round(in_round);
              exchange.poll(group.comm(), leader, trainer);
            } else {
              exchange.end_round(group.comm(), leader, trainer, in_round, last);
            }
          } else {
            exchange.poll(group.comm(), leader, trainer);
          }
          const double waited = exchange.waited_s() - waited0, applied = exchange.applied_s() - applied0;
          times.add(last ? Part::EndWait : Part::CrossSiteWait, waited);
          times.add(Part::Apply, applied);
          times.add(round_end ? Part::RoundEnd : Part::Poll, now() - t0 - waited - applied);
        }
        // Mid-run validation of what the job holds (the global weights, right after a round) for the loss curves.
        if (leader && c.log.eval_every > 0 && done % c.log.eval_every == 0 && done != c.inner.steps) {
          const double val = timed(Part::Eval, [&] { return trainer.validation_loss(); });
          log.metric({{"time", unix_time_now()}, {"site", run.site}, {"replica", run.id}, {"step", done},
                      {"version", exchange.state().version()}, {"val_loss", val}, {"tokens", trainer.state().tokens}});
        }
        // Alone in its group a replica has nobody to compare its weights with (across sites every
        // version is checked against its commit's hash instead): no check, and no copy of the
        // state for a rollback that no disagreement can call for.
        if (c.replicas.sdc_every > 0 && done % c.replicas.sdc_every == 0 && group.size() > 1) {
          const double t_check = now();
          const auto found = timed(Part::Sdc, [&] { return sdc.check(group.comm(), trainer); });
          if (!found.verdict.agree) {
            figures.sdc_finding();
            std::vector<std::string> hashes;
            for (auto h : found.hashes) hashes.push_back(std::to_string(h));
            std::vector<int> odd;
            for (int r : found.verdict.odd_ranks) odd.push_back(group.generation().members[r]);
            log.event("sdc_detected", {{"site", run.site}, {"replica", run.id}, {"step", done},
                                       {"hashes", hashes}, {"odd_replicas", odd}});
            log.event("sdc_repaired", {{"site", run.site},
                                       {"replica", run.id},
                                       {"how", found.verdict.rollback ? "rollback" : "healed from majority"},
                                       {"step", found.step},
                                       {"ms", 1000 * (now() - t_check)}});
          }
        }
        if (group.rank() == 0 && c.checkpoint.every > 0 && done % c.checkpoint.every == 0)
          timed(Part::Checkpoint, [&] { trainer.save_checkpoint(); });
        // Drain: across sites once the round is sent (and merged), alone after this step.
        if (draining && (!exchange.active() || exchange.round_ends(done))) {
          nlohmann::json detail = {{"site", run.site}, {"replica", run.id}, {"step", done}};
          if (exchange.active()) detail.update(exchange.drain(group.comm(), leader, trainer));
          else if (leader) trainer.save_checkpoint();
          mode.drained(leader, detail);
          if (leader) log.event("drained", detail);
          sit_out();
        }
      }
    } catch (const Error& e) {
      if (!is_peer_failure(e)) throw;
      group.report_failure();
      next_generation = group.generation().number + 1;
      continue;
    }
    if (switch_pending) {
      next_generation = group.generation().number + 1;
      continue;
    }
    break;
  }
  const double t_trained = now();
  const auto params_hash = hash64(std::span<const float>(trainer.model().params()));
  if (group.rank() == 0) {
    trainer.save_checkpoint();
    const double t_eval = now();
    const double val = trainer.validation_loss();
    const double eval_s = now() - t_eval;
    times.add(Part::Eval, eval_s);
    log.metric({{"time", unix_time_now()}, {"site", run.site}, {"replica", run.id}, {"step", trainer.state().step},
                {"version", exchange.state().version()}, {"val_loss", val}, {"tokens", trainer.state().tokens}});
    auto summary = exchange.summary(trainer.param_count());
    summary["final_val_loss"] = val;
    summary["steps"] = trainer.state().step;
    summary["rollbacks"] = trainer.state().rollbacks;
    summary["lr_scale"] = trainer.state().lr_scale;
    summary["tokens"] = trainer.state().tokens;
    summary["params_hash"] = std::to_string(hash64(std::span<const float>(trainer.model().params())));
    // compute_utilization: time in inner steps over the whole process; training_utilization:
    // over the training phase (docs/wan.md). Finishing: all after training but the evaluation.
    const double t_end = now();
    times.add(Part::Finish, t_end - t_trained - eval_s);
    summary.update(times.summary(t_end));
    log.summary(summary);
  }
  log.event("replica_done", {{"site", run.site},
                             {"replica", run.id},
                             {"step", trainer.state().step},
                             {"generation", group.generation().number},
                             {"params_hash", std::to_string(params_hash)}});
  store.add(site_keys::done(run.id), 1);  // how an agent that did not start this process learns it ended
  return 0;
}

}  // namespace meridian
