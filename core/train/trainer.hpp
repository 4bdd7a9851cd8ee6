#pragma once
// The single-replica training loop: data -> forward/backward (with grad accumulation) -> clip ->
// AdamW, with evaluation, checkpoints, metrics and exact resume. Later layers (sync/, sites/) run
// many of these and move the flat buffers it owns.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/config/job_config.hpp"
#include "core/data/sampler.hpp"
#include "core/data/tokens.hpp"
#include "core/model/gpt.hpp"
#include "core/optim/adamw.hpp"
#include "core/optim/schedule.hpp"
#include "core/train/train_checkpoint.hpp"

namespace meridian {

class Env;
class RunLog;
class ProgressPrinter;

// Where this trainer sits in a site's data-parallel group. core/ knows nothing about
// communication: the layer above passes `reduce`, which averages the gradients (and the loss) of
// one step over the group and must leave them bit-identical on every replica.
struct ReplicaSlot {
  int rank = 0;   // this replica's place in the group: which windows of each group batch it takes
  int world = 1;  // replicas in the group, all stepping through one data position together
  std::function<void(std::span<float> grads, double& loss)> reduce;
  // Optional: receives each slice of the gradients as backward finishes it (last micro-batch of a
  // step only), so the reduction can start early; `reduce` then completes it.
  std::function<void(std::span<float> bucket)> bucket_ready;
};

struct StepResult {
  std::int64_t step = 0;  // 0-based index of the step just taken
  double loss = 0;        // mean over the micro-batches
  double grad_norm = 0;   // before clipping
  double lr = 0;
  bool lr_injected = false;  // guard.inject_lr_step hit this step (a test hook)
};

struct TrainSummary {
  double final_val_loss = 0;
  double final_train_loss = 0;
  std::int64_t steps = 0, tokens = 0;
  double wall_s = 0, tokens_per_s = 0;
  std::int64_t resumed_from_step = -1;  // -1: started fresh
};

class Trainer {
 public:
  // `now` returns seconds on a monotonic clock; injected so tests control time.
  Trainer(const JobConfig& config, Env& env, RunLog& log, ProgressPrinter* progress,
          std::function<double()> now, ReplicaSlot slot = {});

  // Resumes from the newest valid checkpoint in <run_dir>/checkpoints when there is one, trains
  // to inner.steps (or stop_after more steps, when > 0) and returns the final figures.
  TrainSummary run(std::int64_t stop_after = 0);

  // One optimizer step; exposed for tests and for the replica loop of later layers.
  StepResult step();
  double validation_loss();
  // Moves on to `step` without training the steps in between (none if it is not ahead): the
  // schedule, token count and data position continue from there. How a site that rejoins a job
  // takes up the job's present rather than redoing what the others did meanwhile.
  void fast_forward(std::int64_t step);

  // The whole training state (weights, moments, step, tokens, data position) as checkpoint
  // records, and back: what a replica that lost its state heals from.
  Checkpoint snapshot() const;
  void restore(const Checkpoint& state, const std::string& source);
  // Only the optimizer's moments from such a snapshot: weights, step, data position and extras
  // stay. How a site of a multi-site job drops what a diverging step left in AdamW's statistics
  // while its weights come from the job's newest version.
  void restore_optimizer(const Checkpoint& state, const std::string& source);

  // State the layers above keep beside the trainer's (the outer optimizer of sync/): saved into
  // every snapshot and checkpoint, restored with them, so it heals and resumes with the weights.
  struct Extras {
    std::function<void(Checkpoint&)> save;
    std::function<void(const Checkpoint&)> restore;
  };
  void set_extras(Extras extras) { extras_ = std::move(extras); }

  // After a rollback: the factor on the scheduled learning rate from now on, and the rollbacks so far.
  void set_guard_state(double lr_scale, std::int64_t rollbacks);

  // A new place in a (re-formed) group, and the micro-batches per step that go with it.
  void set_slot(ReplicaSlot slot, int grad_accum);
  int grad_accum() const { return grad_accum_; }

  Gpt<float>& model() { return model_; }
  const ResumeState& state() const { return state_; }

 // Resumes from the newest valid checkpoint in <run_dir>/checkpoints; false when there is none.
  bool try_resume();
  void save_checkpoint();

 private:
  std::int64_t tokens_per_step() const;

  JobConfig config_;
  Env& env_;
  RunLog& log_;
  ProgressPrinter* progress_;
  std::function<double()> now_;
  ReplicaSlot slot_;
  int grad_accum_;
  TrainVal data_;  // declared before sampler_, which views data_.train
  Gpt<float> model_;
  AdamW opt_;
  LrSchedule schedule_;
  WindowSampler sampler_;
  ResumeState state_;
  Extras extras_;
  std::vector<std::uint16_t> inputs_, targets_;
};

}  // namespace meridian
