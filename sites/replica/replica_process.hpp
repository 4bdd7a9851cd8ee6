#pragma once
// One replica process of a site, as an object: it joins the generations its site's agent
// publishes, trains in lockstep with the group, and after each step does the step's duties in
// order: the guard's judgement, operator commands, the metric line, the cross-site exchange,
// evaluation, the silent-data-corruption check, the checkpoint and the drain.
#include <cstdint>
#include <functional>
#include <optional>
#include <type_traits>
#include <utility>

#include "core/runlog/run_log.hpp"
#include "core/train/divergence_guard.hpp"
#include "core/train/text_sample.hpp"
#include "core/train/trainer.hpp"
#include "intrasite/comm/tcp_store.hpp"
#include "intrasite/group/replica_group.hpp"
#include "intrasite/group/sdc_guard.hpp"
#include "intrasite/group/state_sync.hpp"
#include "sites/replica/heartbeat.hpp"
#include "sites/replica/ops_figures.hpp"
#include "sites/replica/ops_inbox.hpp"
#include "sites/replica/replica_loop.hpp"
#include "sites/replica/site_exchange.hpp"
#include "sites/replica/site_mode.hpp"
#include "sites/replica/time_breakdown.hpp"

namespace meridian {

class LeaveOnStop;

class ReplicaProcess {
 public:
  // `stops`: constructed before any thread; on SIGTERM the site leaves the job's membership first.
  // `now`: monotonic seconds; `wall`: the wall clock's (an emulated WAN's schedule).
  ReplicaProcess(const ReplicaRun& run, Env& env, std::function<double()> now, std::function<double()> wall,
                 LeaveOnStop& stops);
  int run();

 private:
  // Where this process stands among its group's generations.
  struct Turn {
    std::optional<std::int64_t> next_generation;  // none: not joined yet
    bool leader = false;                          // of the group joined last
    bool switch_pending = false;                  // a newer generation is published: regroup after this step
    bool job_over = false;                        // drained while the other sites finished the job
    std::int64_t ops_newest = 0;                  // the newest operator command, as the step's all-reduce said
  };
  using Part = TimeBreakdown::Part;

  const JobConfig& config() const { return run_.config; }
  DivergenceGuard::Mode guard_mode() const;
  bool versions() const { return exchange_.active() && !exchange_.synchronous(); }
  nlohmann::json roll_back_to(Trainer& t, std::int64_t version, std::optional<double> scale);

  bool generation();  // joins a group and trains with it; false once training is over
  ReplicaSlot data_slot() const;
  void joined(double t_join, GroupPlace place);
  void resume();
  void take_resumed_parts(const GroupPlace& place);
  nlohmann::json restore_checkpoint(Trainer& t, const std::string& path);
  void whole_unless_readable_by_parts(CheckpointHead& checkpoint) const;
  nlohmann::json read_own_parts(Trainer& t, const CheckpointParts& parts, ShardRange moments, int rank, int ranks);
  void agree_on_commands();
  bool apply_commands(std::int64_t newest);  // true: one replaced the trainer's state
  void sit_out();
  void train();
  void step();  // and its duties; none after a step undone (a rollback, a restored state)
  void log_step(const StepResult& r, std::int64_t done);
  void exchange_step(std::int64_t done, bool last, bool draining);
  void eval_step(std::int64_t done);
  void sample_step(std::int64_t done);
  void sdc_step(std::int64_t done);
  void drain_step(std::int64_t done);
  void finish();
  nlohmann::json memory_ledger() const;

  // Times `f` into `part`; what it returns is passed on.
  template <class F>
  auto timed(Part part, F&& f) {
    const double t0 = now_();
    if constexpr (std::is_void_v<decltype(f())>) {
      f();
      times_.add(part, now_() - t0);
    } else {
      auto out = f();
      times_.add(part, now_() - t0);
      return out;
    }
  }

  const ReplicaRun& run_;
  Env& env_;
  std::function<double()> now_;
  TimeBreakdown times_;
  RunLog log_;
  TcpStoreClient store_;
  Heartbeat heartbeat_;
  Trainer trainer_;
  SiteExchange exchange_;
  OpsFigures figures_;
  SiteMode mode_;
  OpsInbox inbox_;
  ReplicaGroup group_;
  SdcGuard sdc_;
  DivergenceGuard guard_;
  Turn turn_;
  std::int64_t training_peak_rss_ = 0;  // peak resident memory when training ended (finish)
  std::int64_t resume_peak_rss_ = 0;    // ... when a resume from a checkpoint ended (0: none)
  std::int64_t first_join_peak_rss_ = 0;          // ... when the first join ended: start-up, resume and heal
  std::optional<CheckpointParts> resumed_parts_;  // a checkpoint's parts, until the group has formed
  std::optional<TextSampler> sampler_;            // the leader's, at its first sample
  std::size_t training_state_bytes_ = 0;  // the trainer's state then (Trainer::state_bytes)
  // The step and version of the newest periodic checkpoint: when training ends on it, the state is
  // already on disk and finish() does not write it again (a whole save, and its gather under a shard).
  std::pair<std::int64_t, std::int64_t> periodic_saved_{-1, -1};
};

}  // namespace meridian
