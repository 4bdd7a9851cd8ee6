#include "sites/replica/replica_loop.hpp"

#include <omp.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <chrono>
#include <cmath>
#include <thread>

#include "core/runlog/run_log.hpp"
#include "core/train/trainer.hpp"
#include "core/util/error.hpp"
#include "core/util/hash.hpp"
#include "sync/comm/tcp_store.hpp"
#include "sync/group/protocol.hpp"
#include "sync/group/replica_group.hpp"
#include "sync/group/sdc_guard.hpp"
#include "sync/group/state_sync.hpp"
#include "sites/replica/site_exchange.hpp"
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
  RunLog log(c.job.run_dir);
  TcpStoreClient store(run.store_endpoint);
  Heartbeat heartbeat(run.store_endpoint, run.id,
                      std::chrono::milliseconds(std::max(1, c.replicas.heartbeat_timeout_ms / 5)));
  Trainer trainer(c, env, log, nullptr, now);
  SiteExchange exchange(c, run.site, trainer.model().params(), log, now);
  stop_signals.on_stop([&] { exchange.leave(); });
  if (exchange.active())
    trainer.set_extras({[&](Checkpoint& out) { exchange.state().save(out); },
                        [&](const Checkpoint& in) { exchange.state().restore(in); }});
  const double t_start = now();
  double computing_s = 0;
  trainer.try_resume();
  GlooOptions gloo;
  gloo.timeout = std::chrono::milliseconds(c.replicas.collective_timeout_ms);
  ReplicaGroup group(store, run.id, gloo);
  const auto join_timeout = std::chrono::milliseconds(20 * std::max(c.replicas.heartbeat_timeout_ms,
                                                                     c.replicas.collective_timeout_ms));
  std::optional<std::int64_t> next_generation;  // none: this process has not joined yet
  bool switch_pending = false;
  SdcGuard sdc;
  while (true) {
    const double t_join = now();
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
      float control[2] = {static_cast<float>(loss), group.newer_generation_published() ? 1.0f : 0.0f};
      group.comm().allreduce(std::span<float>(control, 2), ReduceOp::Sum);
      loss = control[0] / static_cast<float>(group.size());
      switch_pending = control[1] > 0;
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
      exchange.join(group.comm(), leader, trainer);
      while (trainer.state().step < c.inner.steps && !switch_pending) {
        const double t_step = now();
        StepResult r;
        try {
          r = trainer.step();
          computing_s += now() - t_step;
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
        if (!std::isfinite(r.loss))
          throw make_error(ErrorKind::Data, "replica ", run.id, ": non-finite loss at step ", r.step);
        const auto done = trainer.state().step;
        if (leader && (done % c.log.every == 0 || done == c.inner.steps))
          log.metric({{"time", unix_time_now()}, {"site", run.site}, {"replica", run.id}, {"step", done},
                      {"version", exchange.state().version()}, {"generation", group.generation().number},
                      {"loss", r.loss}, {"lr", r.lr}, {"tokens", trainer.state().tokens}});
        if (exchange.round_ends(done))
          exchange.end_round(group.comm(), leader, trainer, (done - 1) % exchange.inner_steps() + 1,
                             done == c.inner.steps);
        else
          exchange.poll(group.comm(), leader, trainer);
        // Mid-run validation of what the job holds (the global weights, right after a round) for the loss curves.
        if (leader && c.log.eval_every > 0 && done % c.log.eval_every == 0 && done != c.inner.steps)
          log.metric({{"time", unix_time_now()}, {"site", run.site}, {"replica", run.id}, {"step", done},
                      {"version", exchange.state().version()}, {"val_loss", trainer.validation_loss()},
                      {"tokens", trainer.state().tokens}});
        if (c.replicas.sdc_every > 0 && done % c.replicas.sdc_every == 0) {
          const double t_check = now();
          const auto found = sdc.check(group.comm(), trainer);
          if (!found.verdict.agree) {
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
        if (group.rank() == 0 && c.checkpoint.every > 0 && done % c.checkpoint.every == 0) trainer.save_checkpoint();
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
  const auto params_hash = hash64(std::span<const float>(trainer.model().params()));
  if (group.rank() == 0) {
    trainer.save_checkpoint();
    const double val = trainer.validation_loss();
    log.metric({{"time", unix_time_now()}, {"site", run.site}, {"replica", run.id}, {"step", trainer.state().step},
                {"version", exchange.state().version()}, {"val_loss", val}, {"tokens", trainer.state().tokens}});
    auto summary = exchange.summary(trainer.model().params().size());
    summary["final_val_loss"] = val;
    summary["steps"] = trainer.state().step;
    summary["tokens"] = trainer.state().tokens;
    summary["wall_s"] = now() - t_start;
    // Time in training steps over the whole run (joins, waits on other sites, evaluation excluded).
    summary["compute_utilization"] = computing_s / std::max(1e-9, now() - t_start);
    summary["params_hash"] = std::to_string(hash64(std::span<const float>(trainer.model().params())));
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
