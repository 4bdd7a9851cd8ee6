// The trainer's part in ZeRO (ReplicaSlot::shard): the update of its part and the all-gather with
// its undo record, the gradients' pages it gives back (stage 2), and checkpoints in parts.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/checkpoint/store.hpp"
#include "core/runlog/run_log.hpp"
#include "core/train/trainer.hpp"
#include "core/util/error.hpp"
#include "core/util/pages.hpp"
#include "kernels/cpu/chunk_hash.hpp"

namespace meridian {

// The parts travel in the gradients' buffer, free once the update has read it: a gather that
// fails midway leaves the weights untouched but for this replica's part, which the undo record
// can put back. With a mirror (stage 2, whose gradients' buffer is no longer whole) they are
// gathered in place, and the undo record keeps the mirrored part's weights too.
void Trainer::sharded_update(float lr) {
  const ShardRange own = *slot_.shard;
  const auto params = model_->params(), grads = model_->grads();
  const auto mine = params.subspan(own.offset, own.count);
  undo_.weights.assign(mine.begin(), mine.end());
  undo_.m.assign(opt_.m().begin(), opt_.m().end());
  undo_.v.assign(opt_.v().begin(), opt_.v().end());
  undo_.steps_taken = opt_.steps_taken();
  if (shards_weights()) return sharded_update_in_place(lr);
  if (slot_.mirror) {
    undo_.mirror_range = *slot_.mirror;
    const auto theirs = params.subspan(slot_.mirror->offset, slot_.mirror->count);
    undo_.mirror.assign(theirs.begin(), theirs.end());
  } else {
    undo_.mirror = {};
    undo_.mirror_range = {};
  }
  undo_.held = true;
  opt_.step(params, grads, lr);
  if (slot_.mirror) {
    slot_.gather(params);
  } else {
    std::copy(mine.begin(), mine.end(), grads.begin() + static_cast<std::ptrdiff_t>(own.offset));
    slot_.gather(grads);
    std::copy(grads.begin(), grads.end(), params.begin());
  }
  undo_.held = false;
  if (releases_grads()) release_outside_part(grads, {0, grads.size()});
}

namespace {

// Only whole pages go back: a page `own` shares with another part keeps its bytes.
void release_outside(std::span<float> buffer, ShardRange range, ShardRange own) {
  if (range.offset < own.offset)
    release_pages(buffer.subspan(range.offset, std::min(range.end(), own.offset) - range.offset));
  if (range.end() > own.end()) {
    const std::size_t from = std::max(range.offset, own.end());
    release_pages(buffer.subspan(from, range.end() - from));
  }
}

}  // namespace

void Trainer::release_outside_part(std::span<float> buffer, ShardRange range) {
  release_outside(buffer, range, *slot_.shard);
}

std::size_t Trainer::state_bytes() const {
  const std::size_t grads = releases_grads() ? resident_bytes(model_->grads()) : model_->grads().size_bytes();
  const std::size_t params = shards_weights() ? resident_bytes(model_->params()) : model_->params().size_bytes();
  return (opt_.m().size() + opt_.v().size()) * sizeof(float) + params + grads;
}

ShardRange Trainer::mirror_held() const {
  if (shards_weights()) return undo_.mirror_step >= 0 ? undo_.mirror_range : ShardRange{};
  return undo_.held ? undo_.mirror_range : ShardRange{};
}

void Trainer::undo_ungathered_update() {
  const bool whole_step = undo_.undoable;
  MERIDIAN_CHECK((undo_.held || whole_step) && slot_.shard && undo_.m.size() == opt_.m().size(), "undo record ",
                 undo_.held, ", undoable ", whole_step, ", shard ", slot_.shard.has_value());
  std::copy(undo_.weights.begin(), undo_.weights.end(),
            model_->params().begin() + static_cast<std::ptrdiff_t>(slot_.shard->offset));
  std::copy(undo_.m.begin(), undo_.m.end(), opt_.m().begin());
  std::copy(undo_.v.begin(), undo_.v.end(), opt_.v().begin());
  opt_.set_steps_taken(undo_.steps_taken);
  if (whole_step) {  // stage 3: the whole step goes back
    state_ = undo_.state_before;
    sampler_.seek(state_.data);
    undo_.own_step = state_.step;
    undo_.undoable = false;
    return;
  }
  std::copy(undo_.mirror.begin(), undo_.mirror.end(),
            model_->params().begin() + static_cast<std::ptrdiff_t>(undo_.mirror_range.offset));
  undo_.held = false;
}

void Trainer::mirror_into_weights() {
  first_parts_ = false;
  MERIDIAN_CHECK(undo_.mirror.size() == undo_.mirror_range.count && undo_.mirror_step >= 0, "mirror of ",
                 undo_.mirror.size(), " elements for a range of ", undo_.mirror_range.count, ", step ", undo_.mirror_step);
  std::copy(undo_.mirror.begin(), undo_.mirror.end(),
            model_->params().begin() + static_cast<std::ptrdiff_t>(undo_.mirror_range.offset));
}

void Trainer::install_weights_hook() {
  if (!shards_weights()) {
    model_->set_weights_hook({});
    return;
  }
  model_->set_weights_hook({[this](std::size_t offset, std::size_t count) { need_weights({offset, count}); },
                            [this](std::size_t offset, std::size_t count) {
                              if (weights_whole_) return;
                              release_outside_part(model_->params(), {offset, count});
                              held_weights_.remove({offset, count});
                            }});
}

// Gathered ranges stay valid until the next update, which gives them all back.
void Trainer::need_weights(ShardRange range) {
  if (weights_whole_) return;
  const std::size_t previous = std::exchange(last_needed_, range.offset);
  if (held_weights_.covers(range)) return;
  const ShardRange window = gather_window(range, previous, param_count());
  slot_.gather_range(model_->params(), window);
  held_weights_.add(window);
}

// Every member starts each step (and each pass after the update) from here, so all ask for the
// same windows: the collectives of a stage-3 pass must match across the group.
void Trainer::give_back_weights() {
  const auto params = model_->params();
  release_outside_part(params, {0, params.size()});
  held_weights_.clear();
  last_needed_ = 0;
}

// Whole weights (a start, a heal, a reader) become this replica's part again, the mirror taken
// from them.
void Trainer::begin_sharded_step() {
  if (weights_whole_) take_part_and_mirror();
}

void Trainer::take_part_and_mirror() {
  const auto params = model_->params();
  const ShardRange m = *slot_.mirror;
  undo_.mirror_range = m;
  undo_.mirror.assign(params.begin() + static_cast<std::ptrdiff_t>(m.offset),
                      params.begin() + static_cast<std::ptrdiff_t>(m.end()));
  undo_.mirror_step = undo_.own_step = state_.step;
  give_back_weights();
  weights_whole_ = false;
}

bool Trainer::holds_part_and_mirror(ShardRange part, std::optional<ShardRange> mirror) const {
  return shards_weights() && part == *slot_.shard && mirror == slot_.mirror &&
         (weights_whole_ || (undo_.own_step == state_.step && undo_.mirror_step == state_.step));
}

std::span<float> Trainer::part_and_mirror() {
  if (!weights_whole_) mirror_into_weights();
  return model_->params();
}

void Trainer::keep_part_and_mirror() {
  first_parts_ = false;
  take_part_and_mirror();
}

// Stage 3: no all-gather. The part's new weights go to the rank that mirrors them, and the
// mirrored part's come here; the step counts once this completes (Trainer::step).
void Trainer::sharded_update_in_place(float lr) {
  const ShardRange own = *slot_.shard;
  const auto params = model_->params(), grads = model_->grads();
  undo_.state_before = state_;
  undo_.undoable = true;
  opt_.step(params, grads, lr);
  undo_.own_step = state_.step + 1;
  give_back_weights();  // what is still gathered would be of the step before
  release_outside_part(grads, {0, grads.size()});
  undo_.shifted.resize(undo_.mirror_range.count);
  slot_.shift(params.subspan(own.offset, own.count), undo_.shifted);
  undo_.mirror.swap(undo_.shifted);
  undo_.mirror_step = state_.step + 1;
  release_pages(std::span<float>(undo_.shifted));  // the old mirror: held only during a shift
}

std::pair<std::uint64_t, std::uint64_t> Trainer::part_hashes() const {
  MERIDIAN_CHECK(shards_weights() && (weights_whole_ || (undo_.mirror_step == state_.step && undo_.own_step == state_.step)),
                 "part hashes at step ", state_.step, ": the part is of step ", undo_.own_step, ", the mirror of ",
                 undo_.mirror_step);
  const auto params = model_->params();
  const auto own = params.subspan(slot_.shard->offset, slot_.shard->count);
  const std::span<const float> mirror =
      weights_whole_ ? params.subspan(slot_.mirror->offset, slot_.mirror->count) : std::span<const float>(undo_.mirror);
  return {kernels::chunked_hash64(own.data(), own.size_bytes()), kernels::chunked_hash64(mirror.data(), mirror.size_bytes())};
}

// The part and mirror a whole group's cut gives this replica's number, written from the seed
// alone: the generator runs over every weight, only these are kept.
void Trainer::init_first_parts(ReplicaSlot::FirstPart first) {
  const ShardMap map(param_count(), first.ranks);
  const ShardRange own = map.part(first.rank), mirror = map.part((first.rank + 1) % first.ranks);
  const ShardRange keep[] = {own, mirror};
  model_->init_weights(config_.job.seed, keep);
  const auto params = model_->params();
  undo_.mirror_range = mirror;
  undo_.mirror.assign(params.begin() + static_cast<std::ptrdiff_t>(mirror.offset),
                      params.begin() + static_cast<std::ptrdiff_t>(mirror.end()));
  release_outside(params, {0, params.size()}, own);
  first_own_ = own;
  undo_.mirror_step = undo_.own_step = 0;
  weights_whole_ = false;
  first_parts_ = true;
}

Trainer::FirstParts Trainer::first_parts() const {
  MERIDIAN_CHECK(first_parts_, "first_parts() of a trainer that holds none (step ", state_.step, ")");
  const auto params = model_->params();
  return {first_own_, undo_.mirror_range, params.subspan(first_own_.offset, first_own_.count), undo_.mirror};
}

bool Trainer::first_parts_in_place(const ReplicaSlot& next) const {
  return first_parts_ && next.gather_range && next.shard == opt_.shard() && next.mirror == undo_.mirror_range;
}

void Trainer::build_initial_weights() {
  MERIDIAN_CHECK(first_parts_ && state_.step == 0, "the initial weights rebuilt at step ", state_.step,
                 " by a trainer holding ", first_parts_ ? "its first parts" : "weights written since");
  model_->init_weights(config_.job.seed);
  undo_ = PartUndo{};
  weights_whole_ = true;
  first_parts_ = false;
}

void Trainer::drop_gathered_weights() {
  if (shards_weights()) begin_sharded_step();
}

void Trainer::ensure_whole_weights() const {
  if (weights_whole_) return;
  first_parts_ = false;
  ++whole_gathers_;
  const auto params = model_->params();
  slot_.gather(params);
  weights_whole_ = true;
}

// The mirror is not kept: the owners hold it, and a restore shifts it anew.
Checkpoint Trainer::snapshot_held() const {
  if (!shards_weights() || (!weights_whole_ && undo_.own_step != state_.step)) return snapshot();
  Checkpoint out = snapshot_meta();
  const ShardRange own = *slot_.shard;
  out.put_pod<float>("params.part", model_->params().subspan(own.offset, own.count));
  out.put_pod<std::uint64_t>("params.part_range", std::vector<std::uint64_t>{own.offset, own.count});
  out.put_pod<float>("adamw.m", opt_.m());
  out.put_pod<float>("adamw.v", opt_.v());
  out.put_pod<std::uint64_t>("adamw.shard", std::vector<std::uint64_t>{own.offset, own.count});
  return out;
}

// Only into the place it was taken in: the guards that keep such a state drop it when the group
// re-forms. The weights outside the part are not held afterwards (the next forward gathers them).
void Trainer::restore_held_part(const Checkpoint& state, const std::string& source) {
  const auto range = [](const std::vector<std::uint64_t>& r) {
    return r.size() == 2 ? ShardRange{r[0], r[1]} : ShardRange{0, 0};
  };
  const ShardRange part = range(state.get_pod<std::uint64_t>("params.part_range"));
  MERIDIAN_CHECK(shards_weights() && part == *slot_.shard, source,
                 ": a part of the weights restored into another place (part at ", part.offset, "+", part.count,
                 ", this replica's at ", slot_.shard ? slot_.shard->offset : 0, ")");
  const auto weights = state.get_pod<float>("params.part");
  state_ = decode_train_meta(state, source, config_.model, opt_);
  decode_optimizer_state(state, source, opt_);
  restored(state);
  const auto params = model_->params();
  const auto own = params.subspan(slot_.shard->offset, slot_.shard->count);
  std::copy(weights.begin(), weights.end(), own.begin());
  give_back_weights();
  weights_whole_ = false;
  undo_.mirror_range = *slot_.mirror;
  undo_.mirror.resize(undo_.mirror_range.count);
  slot_.shift(own, undo_.mirror);
  undo_.mirror_step = undo_.own_step = state_.step;
}

void Trainer::save_checkpoint_in_parts(bool write) {
  const ShardRange own = *slot_.shard;
  MERIDIAN_CHECK(slot_.barrier && !slot_.parts.empty(), "a checkpoint in parts needs the slot's parts and barrier");
  CheckpointStore store(env_, config_.job.run_dir / "checkpoints", config_.checkpoint.keep);
  Checkpoint part;
  part.put_pod<float>("adamw.m", opt_.m());
  part.put_pod<float>("adamw.v", opt_.v());
  part.put_pod<std::uint64_t>("adamw.shard", std::vector<std::uint64_t>{own.offset, own.count});
  part.put_value<std::int64_t>("train.step", state_.step);
  // Stage 3: the weights go in the parts too, so nobody gathers them.
  if (shards_weights()) part.put_pod<float>("params", model_->params().subspan(own.offset, own.count));
  if (extras_.save_part) extras_.save_part(part);
  store.save_part(state_.step, own.offset, part);
  slot_.barrier();  // every part is on disk before the checkpoint that names them
  if (!write || !sound_to_write()) return;  // parts left without a checkpoint go at the next save
  Checkpoint out = snapshot_meta();
  if (!shards_weights()) out.put_pod<float>("params", model_->params());
  std::vector<std::uint64_t> manifest = {slot_.parts.size()};
  std::size_t offset = 0;
  for (const std::size_t count : slot_.parts) {
    manifest.insert(manifest.end(), {offset, count});
    offset += count;
  }
  out.put_pod<std::uint64_t>("adamw.parts", manifest);
  const auto path = store.save(state_.step, out);
  log_.event("checkpoint", {{"step", state_.step}, {"path", path.string()}, {"parts", slot_.parts.size()}});
  if (extras_.written) extras_.written();
}

}  // namespace meridian
