#pragma once
// The single-replica training loop: data -> forward/backward (with grad accumulation) -> clip ->
// AdamW, with evaluation, checkpoints, metrics and exact resume. Later layers (intrasite/, crosssite/, sites/) run
// many of these and move the flat buffers it owns.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/checkpoint/store.hpp"
#include "core/config/job_config.hpp"
#include "core/data/sampler.hpp"
#include "core/model/language_model.hpp"
#include "core/model/shard_map.hpp"
#include "core/optim/adamw.hpp"
#include "core/optim/grad_clip.hpp"
#include "core/optim/muon.hpp"
#include "core/optim/schedule.hpp"
#include "core/train/device_step.hpp"
#include "core/train/gather_window.hpp"
#include "core/train/job_data.hpp"
#include "core/train/train_checkpoint.hpp"
#include "core/util/pages.hpp"

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
  // ZeRO stage 1 (core/model/shard_map.hpp), when set: this replica updates the weights of `shard`
  // alone and AdamW keeps moments for those only. `reduce` need then leave only the shard's
  // gradients reduced (a reduce-scatter); `gather` brings every replica's updated part into the
  // weights (an all-gather); `gather_unit_sums` does the same for the gradients' sums of squares
  // per unit, from which every replica adds the one norm it clips by (grad_clip.hpp).
  std::optional<ShardRange> shard;
  std::function<void(std::span<float> params)> gather;
  UnitSumsGather gather_unit_sums;
  // Beside `shard`: every replica's part in elements, in rank order (the shard map's cut), and a
  // barrier over the group, for a checkpoint written in parts ([checkpoint] per_replica).
  std::vector<std::size_t> parts;
  std::function<void()> barrier;
  // ZeRO stage 2, beside `shard`: reduces a range of the gradients as soon as backward has
  // finished it (a reduce-scatter of the shard map's cut of the range; last micro-batch only), and
  // the trainer then gives back the pages of the range outside its part (core/util/pages.hpp).
  // `reduce` then only averages the loss.
  std::function<void(std::span<float> grads, ShardRange range)> reduce_range;
  // Stage 2: the next rank's part. With it the weights are all-gathered in place rather than
  // through the gradients' buffer (which stage 2 no longer holds whole), and this replica keeps
  // that part's weights from before the update beside its own (4/M bytes per parameter), so that
  // a group whose all-gather failed midway can put every part back, a dead rank's too
  // (intrasite/group/state_sync).
  std::optional<ShardRange> mirror;
  // ZeRO stage 3, beside the above: the weights outside this replica's part are not held between
  // steps. gather_range all-gathers a range of them in place (the shard map's cut of the range)
  // just before forward or backward reads it, and the trainer gives the range's pages back after
  // (LanguageModel::WeightsHook). The mirror is then kept apart: after each update, shift sends
  // this replica's part to the rank that mirrors it and receives the mirrored part (a ring shift),
  // so that a dead rank's part of the weights is still held by one other.
  std::function<void(std::span<float> weights, ShardRange range)> gather_range;
  std::function<void(std::span<const float> own, std::span<float> mirrored)> shift;
  // Without `shard` (a sharded site's replica before its group forms): the part of AdamW's moments
  // to build, rank `rank` of `ranks` under ShardMap, so that no replica holds them whole; the
  // group's first cut keeps them where it is the same (intrasite/group/state_sync). `weights`: its
  // part of the initial weights too, and its mirror of the next rank's (ZeRO stage 3, where nothing
  // else needs them whole: Trainer::holds_first_parts).
  struct FirstPart {
    int rank = 0, ranks = 1;
    bool weights = false;
  };
  std::optional<FirstPart> moments_first;
};

// Stage 2 reduces backward's finished ranges in runs of at least this many elements (4 MiB of
// fp32): fewer collectives for small layers, and at most this much beyond a layer held unreduced.
inline constexpr std::size_t kMinReduceRange = std::size_t{1} << 20;

struct StepResult {
  std::int64_t step = 0;  // 0-based index of the step just taken
  double loss = 0;        // mean over the micro-batches
  double grad_norm = 0;   // before clipping
  double lr = 0;
  bool lr_injected = false;  // guard.inject_lr_step hit this step (a test hook)
  // fp16 on a GPU: the gradients overflowed under the loss scale, so the update was skipped (the
  // step still counts: its batch is spent and the schedule moves on, as dynamic loss scaling
  // does); grad_norm is then 0. loss_scale: the scale after this step (0 without loss scaling),
  // and the scaler's floor; the divergence guard watches them.
  bool skipped = false;
  double loss_scale = 0, loss_scale_floor = 0;
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
  // `now` returns seconds on a monotonic clock; injected so tests control time. On a GPU
  // (`device`), the step runs there (DeviceStep) and model() is a host copy kept in step with it.
  Trainer(const JobConfig& config, Env& env, RunLog& log, ProgressPrinter* progress,
          std::function<double()> now, ReplicaSlot slot = {}, ComputeDevice device = {});

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
  // What a guard keeps to roll back to: snapshot(), but at ZeRO stage 3 this replica's part of the
  // weights ("params.part") in place of the whole, 12/M bytes per parameter with the moments
  // rather than 4 + 8/M. restore() takes it back when every member of the same group restores its
  // own at once, as the guards' rollbacks do: the mirrors are then shifted anew (a collective).
  Checkpoint snapshot_held() const;
  // The same without the bulk (the weights and the moments: encode_train_meta), for a heal that
  // moves the bulk straight between the replicas' buffers: it writes them through bulk() (the host
  // buffers, brought up to date from a GPU first), then restores the rest with restore_meta, which
  // also sends the bulk to the GPU.
  Checkpoint snapshot_meta() const;
  // A hash of everything snapshot() holds (the weights, the moments this replica keeps, the
  // records of snapshot_meta, the extras' state), read in place but for the small records:
  // replicas whose fingerprints match hold the same state, and a heal between them moves nothing.
  // `with_moments` false: all but the moments (members holding parts of them compare the rest);
  // `with_weights` false: all but the weights too (members holding their first parts of them).
  std::uint64_t state_fingerprint(bool with_moments = true, bool with_weights = true);
  struct Bulk {
    std::span<float> params, m, v;  // m and v: the moments this replica keeps (moments_held)
  };
  Bulk bulk();
  void restore_meta(const Checkpoint& meta, const std::string& source);
  // Only the optimizer's moments from such a snapshot: weights, step, data position and extras
  // stay. How a site of a multi-site job drops what a diverging step left in AdamW's statistics
  // while its weights come from the job's newest version.
  void restore_optimizer(const Checkpoint& state, const std::string& source);

  // State the layers above keep beside the trainer's (the outer optimizer of crosssite/): saved into
  // every snapshot and checkpoint, restored with them, so it heals and resumes with the weights.
  struct Extras {
    std::function<void(Checkpoint&)> save;
    std::function<void(const Checkpoint&)> restore;
    std::function<void()> written;  // a checkpoint with the state `save` gave is on disk, whole
    // Every member, right before a whole checkpoint is written (the last collective of it): what
    // `save` needs from the others.
    std::function<void()> gather;
    // A hash of what `save` writes, read in place (state_fingerprint); required with `save`.
    std::function<std::uint64_t()> fingerprint;
    // Every member, into its part of a checkpoint written in parts ([checkpoint] per_replica): the
    // records of its own share of the extras' state (a slice, core/checkpoint/sliced_records.hpp),
    // so that nobody gathers them; `save` then writes the rest.
    std::function<void(Checkpoint&)> save_part;
    // The writer, right before a checkpoint is written: why what `save` gives must not replace the
    // last checkpoint (a copy of the outer state found not to be its version), or empty. The
    // write is skipped then, and said (a `checkpoint_skipped` event).
    std::function<std::string()> unsound;
  };
  void set_extras(Extras extras) { extras_ = std::move(extras); }

  // After a rollback: the factor on the scheduled learning rate from now on, and the rollbacks so far.
  void set_guard_state(double lr_scale, std::int64_t rollbacks);

  // A new place in a (re-formed) group, and the micro-batches per step that go with it. A new
  // shard keeps AdamW's moments of the elements this replica owned before; those it did not own
  // start from zero.
  void set_slot(ReplicaSlot slot, int grad_accum);
  int grad_accum() const { return grad_accum_; }

  // The weights on the host. On a GPU this fetches them first, and whatever the caller changes
  // goes back to the device before it computes again.
  LanguageModel<float>& model();
  // The job's tokenizer as read at start-up ([data] tokenizer), which checkpoints keep.
  const std::optional<TokenizerFile>& tokenizer() const { return tokenizer_; }
  std::size_t param_count() const { return model_->layout().total(); }
  // The weights' fingerprint (kernels::chunked_hash64), computed where they live: the same value
  // on the CPU and on a GPU, and no copy of the weights on a GPU. What replicas compare for SDC.
  std::uint64_t params_hash();
  // On a GPU, the attention kernel that runs (DeviceStep::attention); empty on the CPU.
  std::string device_attention() const { return device_ ? device_->attention() : std::string(); }
  const ResumeState& state() const { return state_; }

  // Resumes from the newest valid checkpoint in <run_dir>/checkpoints; false when there is none.
  bool try_resume();
  // The newest valid checkpoint in <run_dir>/checkpoints (rejected ones logged), if any.
  std::optional<Checkpoint> newest_checkpoint();
  // The same with a checkpoint's parts checked and left on disk (core/checkpoint/checkpoint_parts),
  // and the resume from it: every record but the moments (restore_moments takes them by range) and
  // the extras' slices (theirs to take). Without parts, resume_from restores it whole.
  std::optional<CheckpointStore::LoadedHead> newest_checkpoint_head();
  void resume_from(const CheckpointStore::LoadedHead& loaded);
  // The same restore without the resume's log: of a file read by read_checkpoint_head.
  void restore_head(const CheckpointHead& checkpoint, const std::string& source);
  // AdamW's moments of `range` from a checkpoint's parts; this replica keeps that range from then
  // on (set_slot with the same shard moves nothing). A shard's group calls it before sync_state.
  void restore_moments(const CheckpointParts& parts, ShardRange range);
  // Writes a checkpoint of the whole state when `write`. Under a shard every member of the group
  // must call it at the same step: the moments are all-gathered first (8 bytes per parameter for
  // the moment), so the file is the one an unsharded replica writes and loads at any replica count.
  // With [checkpoint] per_replica each member writes its part of the moments instead, and the
  // member that writes, once every part is on disk, the rest naming them (core/checkpoint/store.hpp).
  void save_checkpoint(bool write = true);

  // The optimizer's state: under a shard, the moments of its part alone (moments_held, without
  // fetching them from a GPU).
  const AdamW& optimizer() const;
  ShardRange moments_held() const { return opt_.shard(); }
  // The training state's buffers on the host, in bytes: weights, gradients and the optimizer's
  // moments (activations are not state: they scale with the batch, not the model).
  // Under ZeRO stage 2 the gradients count the pages they hold (their part, once a step is done).
  std::size_t state_bytes() const;
  // The model's activation buffers on the host (core/model/recompute.hpp), in bytes.
  std::size_t activation_bytes() const { return model_->activation_bytes(); }
  // Under a shard, the undo record of its part (below): 12 bytes per parameter of the part.
  // With a mirror (stages 2 and 3), the next rank's weights too: 16/M bytes per parameter.
  std::size_t undo_bytes() const {
    return (undo_.weights.capacity() + undo_.m.capacity() + undo_.v.capacity() + undo_.mirror.capacity()) *
               sizeof(float) +
           resident_bytes(std::span<const float>(undo_.shifted));
  }
  // Under a shard, a step whose all-gather failed leaves this replica's part of the weights and
  // its moments updated and the rest of the weights as they were; a healing group either takes
  // the whole step from a member that completed it or undoes this part (12 bytes per parameter of
  // the part are kept for that). Any restore clears it.
  // With a mirror the weights were gathered in place, so every part may be torn: the undo puts
  // back this replica's part and the mirrored one, and the group the others (state_sync).
  bool holds_ungathered_update() const { return undo_.held; }
  void undo_ungathered_update();
  // A heal writes the source's weights (and moments) straight into a differing member's buffers:
  // until it ends they are no one step's state, and if the source dies midway they stay so. The
  // heal (state_sync) marks and clears it; a member holding such a state is never a heal's source.
  bool holds_torn_state() const { return torn_; }
  void set_torn_state(bool torn) { torn_ = torn; }
  // The part whose weights from before the update this replica keeps beside its own, while an
  // ungathered update is held (empty otherwise).
  // At stage 3 the mirror is kept from step to step: the next rank's part as it was after step
  // mirror_step(). This replica's own part is at own_part_step(): one past its step when the
  // step failed after the update (in the shift). Its last update can be undone with the step's
  // training state (can_undo_update), so a group whose dead rank's part of a step never reached
  // its mirror goes back to the step before.
  ShardRange mirror_held() const;
  std::int64_t mirror_step() const { return undo_.mirror_step; }
  std::int64_t own_part_step() const { return undo_.own_step; }
  bool can_undo_update() const { return undo_.undoable; }
  // A heal's: the mirror written into the weights' buffer, where the group collects the parts.
  void mirror_into_weights();
  // Stage 3: the weights outside this replica's part are not held now (they read as zero). Any
  // reader of the whole weights (model(), params_hash, snapshots, checkpoints) first gathers them,
  // a collective every member must enter at the same point; the next step gives them back.
  bool weights_sharded() const { return !weights_whole_; }
  // Stage 3's slot: whether this replica keeps a part of the weights and a mirror. Then
  // part_hashes gives kernels::chunked_hash64 of its part's weights and of the mirror, both of the
  // step it is at (the SDC guard compares each part's two copies).
  bool shards_weights() const { return slot_.shard && slot_.gather_range; }
  std::pair<std::uint64_t, std::uint64_t> part_hashes() const;
  // Stage 3: whole weights a reader gathered (or the layers above rewrote) go back to this
  // replica's part, the mirror taken from them; what the next step does anyway.
  void drop_gathered_weights();
  // A stage-3 replica told so (ReplicaSlot::FirstPart::weights) is built holding only its part of
  // the initial weights and its mirror of the next rank's, never the whole. Until anything
  // else writes the weights (a step, a restore, a gather) it holds those first parts: a group of
  // such members whose slots cut them alike moves nothing (first_parts_in_place); any other
  // group builds the whole initial weights anew from the seed (build_initial_weights).
  bool holds_first_parts() const { return first_parts_; }
  // While it does: the part it holds and its mirror, with their initial values.
  struct FirstParts {
    ShardRange own, mirror;
    std::span<const float> own_values, mirror_values;
  };
  FirstParts first_parts() const;
  // The host buffer of the weights as this replica holds it, gathering nothing: whole unless
  // weights_sharded() (then only its part's values are there). What a job of one site's exchange,
  // which reads no weights, is built over.
  std::span<const float> weights_as_held() const { return model_->params(); }
  bool first_parts_in_place(const ReplicaSlot& next) const;
  void build_initial_weights();
  // Stage 3: whether this replica's part and mirror are `part` and `mirror` (a sharded outer
  // state's under the same cut). part_and_mirror() is then the weights' buffer with the mirror
  // written in beside the part, nothing gathered (the rest not to be read), and
  // keep_part_and_mirror() takes back what was written there: the mirror, and the part in place.
  // A round across sites reads and rewrites them so, and never holds the whole weights.
  bool holds_part_and_mirror(ShardRange part, std::optional<ShardRange> mirror) const;
  std::span<float> part_and_mirror();
  void keep_part_and_mirror();
  // How many times the whole weights were gathered (ensure_whole_weights), for the memory ledger.
  std::int64_t whole_weight_gathers() const { return whole_gathers_; }

 private:
  std::int64_t tokens_per_step() const;
  // On a GPU: the host copies brought up to date (weights; with the moments, AdamW's too).
  void fetch_from_device(bool with_moments) const;
  void send_to_device_if_changed();
  // One step's gradients and update. NonFinite: the loss or the gradients are not finite and
  // the step does not count (the weights are untouched; the caller decides).
  enum class Update { Applied, Skipped, NonFinite };
  Update cpu_step(StepResult& r);
  Update device_step(StepResult& r);
  // `extras`: with the extras' records (state_fingerprint hashes them apart).
  Checkpoint snapshot_of(bool bulk, bool extras = true) const;
  void save_checkpoint_in_parts(bool write);
  bool sound_to_write();  // Extras::unsound says nothing against the write
  void restore_held_part(const Checkpoint& state, const std::string& source);
  CheckpointStore checkpoint_store() const;
  void checkpoint_rejected(const std::string& why);  // logged, and said
  void resumed(const std::filesystem::path& path);
  void restored(const Checkpoint& state);  // what follows any restore: the GPU, the data, the extras
  void sharded_update(float lr);  // AdamW over this replica's part, then the parts all-gathered
  bool releases_grads() const { return slot_.shard && slot_.reduce_range; }  // ZeRO stage 2
  void release_outside_part(std::span<float> buffer, ShardRange range);
  // Stage 3: what a step starts with (the mirror taken from whole weights, the rest given back),
  // and the update of its part with the mirrors shifted.
  void begin_sharded_step();
  void take_part_and_mirror();  // the mirror from the weights' buffer, the rest given back
  void sharded_update_in_place(float lr);
  void init_first_parts(ReplicaSlot::FirstPart first);
  void ensure_whole_weights() const;  // gathers them when sharded (collective)
  void need_weights(ShardRange range);  // the model's hook: gathers a window around the range
  void give_back_weights();             // every page outside the part, and forgets what was held
  void install_weights_hook();
  void next_batch();  // the next micro-batch of this replica's windows into inputs_/targets_
  // The end of run(): the final evaluation and checkpoint, the summary and its log lines.
  TrainSummary finish_run(TrainSummary summary, std::int64_t first_step, double t0, const StepResult& last);

  JobConfig config_;
  Env& env_;
  RunLog& log_;
  ProgressPrinter* progress_;
  std::function<double()> now_;
  ReplicaSlot slot_;
  int grad_accum_;
  JobData data_;
  std::optional<TokenizerFile> tokenizer_;  // [data] tokenizer: into every checkpoint
  // On a GPU these are host copies of the device's state, refreshed by const readers (snapshot)
  // too, hence mutable; device_ is null on the CPU.
  std::unique_ptr<LanguageModel<float>> model_;
  mutable AdamW opt_;
  std::optional<Muon> muon_;  // inner.optimizer = "muon": the matrices' half (its momentum lives in opt_.m())
  std::unique_ptr<DeviceStep> device_;
  mutable bool host_behind_ = false;     // the device stepped since the host weights were fetched
  mutable bool moments_behind_ = false;  // ... since the host moments were fetched
  bool device_behind_ = false;           // the host weights was handed out (or restored) since the last upload
  LrSchedule schedule_;
  WindowSampler sampler_;
  ResumeState state_;
  Extras extras_;
  std::vector<std::int32_t> inputs_, targets_;
  // This replica's part of the weights, and the moments, before a sharded update; the buffers stay
  // allocated from step to step.
  struct PartUndo {
    std::vector<float> weights, m, v;
    std::vector<float> mirror;  // the mirrored part's weights (a slot's mirror)
    ShardRange mirror_range;
    std::int64_t steps_taken = 0;
    bool held = false;
    // Stage 3: the steps the mirror and the own part are of (-1: none yet), and whether the last
    // update can be undone, with the training state from before it; `shifted` receives the
    // mirrored part before it replaces the mirror, so a failed shift leaves the mirror whole.
    std::int64_t mirror_step = -1, own_step = -1;
    bool undoable = false;
    ResumeState state_before;
    std::vector<float> shifted;
  };
  PartUndo undo_;
  mutable bool weights_whole_ = true;
  mutable bool first_parts_ = false;  // holds_first_parts
  bool torn_ = false;                 // holds_torn_state
  ShardRange first_own_{};
  mutable std::int64_t whole_gathers_ = 0;
  // Stage 3: what the model's hook has gathered and not given back, and where it last asked.
  HeldRanges held_weights_;
  std::size_t last_needed_ = 0;
};

}  // namespace meridian
