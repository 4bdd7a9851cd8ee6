#include "core/train/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/checkpoint/store.hpp"
#include "core/config/inner_schedule.hpp"
#include "core/data/tokens.hpp"
#include "core/io/env.hpp"
#include "core/optim/grad_clip.hpp"
#include "core/optim/muon.hpp"
#include "core/optim/sgd.hpp"
#include "core/runlog/progress.hpp"
#include "core/runlog/run_log.hpp"
#include "core/train/divergence_guard.hpp"
#include "core/train/evaluate.hpp"
#include "core/train/init_from.hpp"
#include "core/train/job_data.hpp"
#include "core/train/text_sample.hpp"
#include "core/util/error.hpp"
#include "core/util/hash.hpp"
#include "core/util/pages.hpp"
#include "kernels/cpu/chunk_hash.hpp"
#include "kernels/cpu/newton_schulz.hpp"

namespace meridian {
namespace {

AdamWOptions adamw_options(const JobConfig& c) {
  return {static_cast<float>(c.inner.beta1), static_cast<float>(c.inner.beta2), static_cast<float>(c.inner.eps),
          static_cast<float>(c.inner.weight_decay)};
}

bool uses_muon(const JobConfig& c) { return c.inner.optimizer == JobConfig::Inner::Optimizer::Muon; }

// Under Muon, AdamW keeps the views Muon does not take (muon.hpp).
AdamW make_adamw(const JobConfig& c, const ParamLayout& layout, const std::optional<ShardRange>& shard) {
  if (shard) {
    if (c.inner.optimizer != JobConfig::Inner::Optimizer::AdamW)
      throw make_error(ErrorKind::Config, "inner.optimizer = \"", to_string(c.inner.optimizer),
                       "\" cannot shard its state across a site's replicas; \"adamw\" can");
    return AdamW(layout, adamw_options(c), *shard);
  }
  return uses_muon(c) ? AdamW(layout, adamw_options(c), ranges_without_muon(layout)) : AdamW(layout, adamw_options(c));
}

// The moments a trainer builds: its shard's, else the part it is told it will keep, else whole.
std::optional<ShardRange> first_moments(const ReplicaSlot& slot, std::size_t params) {
  if (slot.shard || !slot.moments_first || slot.moments_first->ranks < 2) return slot.shard;
  return ShardMap(params, slot.moments_first->ranks).part(slot.moments_first->rank);
}

// The moments of `from` for the elements `to` (none: the whole model) covers too; zero for the others.
AdamW reshard(const AdamW& from, const JobConfig& c, const ParamLayout& layout, const std::optional<ShardRange>& to) {
  AdamW out = make_adamw(c, layout, to);
  const ShardRange had = from.shard(), now = out.shard();
  for (std::size_t i = std::max(had.offset, now.offset); i < std::min(had.end(), now.end()); ++i) {
    out.m()[i - now.offset] = from.m()[i - had.offset];
    out.v()[i - now.offset] = from.v()[i - had.offset];
  }
  out.set_steps_taken(from.steps_taken());
  return out;
}

void check_slot(const ReplicaSlot& slot, std::size_t params, bool on_device) {
  MERIDIAN_CHECK(!slot.shard || (slot.gather && slot.gather_unit_sums && slot.shard->end() <= params && !on_device),
                 "a shard needs gather and gather_unit_sums, and the CPU: shard ", slot.shard->offset, "+", slot.shard->count,
                 " of ", params, ", device ", on_device);
  MERIDIAN_CHECK(!slot.gather_range || (slot.shard && slot.mirror && slot.reduce_range && slot.shift),
                 "stage 3 (gather_range) needs stage 2's shard, mirror and reduce_range, and shift");
}

std::optional<Muon> make_muon(const JobConfig& c, const ParamLayout& layout) {
  if (!uses_muon(c)) return std::nullopt;
  return Muon(layout, {static_cast<float>(c.inner.muon_momentum), true, kernels::kNewtonSchulzSteps,
                       static_cast<float>(c.inner.weight_decay)});
}

}  // namespace

Trainer::Trainer(const JobConfig& config, Env& env, RunLog& log, ProgressPrinter* progress, std::function<double()> now,
                 ReplicaSlot slot, ComputeDevice device)
    : config_(config),
      env_(env),
      log_(log),
      progress_(progress),
      now_(std::move(now)),
      slot_(std::move(slot)),
      grad_accum_(config.inner.grad_accum),
      data_(load_job_data(config)),
      tokenizer_(load_job_tokenizer(config)),
      model_(make_model<float>(config.model)),
      opt_(make_adamw(config, model_->layout(), first_moments(slot_, model_->layout().total()))),
      muon_(make_muon(config, model_->layout())),
      schedule_(inner_schedule(config.inner)),
      sampler_(make_job_sampler(data_.train, config)) {
  check_validation_windows(data_, config);
  model_->set_recompute(config.parallel.recompute);
  state_.data = sampler_.position();
  if (config.model_init_from) {
    const std::vector<float> weights = load_init_from(*config.model_init_from, config.model);
    std::copy(weights.begin(), weights.end(), model_->params().begin());
  } else if (!slot_.shard && slot_.moments_first && slot_.moments_first->weights && slot_.moments_first->ranks > 1 &&
             device.kind != JobConfig::Site::Device::Cuda) {
    init_first_parts(*slot_.moments_first);
  } else {
    model_->init_weights(config.job.seed);
  }
  check_slot(slot_, param_count(), device.kind == JobConfig::Site::Device::Cuda);
  install_weights_hook();
  if (device.kind == JobConfig::Site::Device::Cuda) {
    if (config.inner.optimizer != JobConfig::Inner::Optimizer::AdamW)
      throw make_error(ErrorKind::Config, "inner.optimizer = \"", to_string(config.inner.optimizer),
                       "\" runs on the CPU only; a site with device = \"cuda\" trains with \"adamw\"");
    device_ = make_cuda_step(config.model, adamw_options(config), device);
    device_->upload_params(model_->params());
    device_->reserve(config.inner.batch_per_replica);
    log_.event("device", {{"attention", device_->attention()}});
    if (progress_) progress_->line("attention: " + device_->attention());
  }
  const std::size_t micro = static_cast<std::size_t>(config.inner.batch_per_replica) * config.model.seq_len;
  inputs_.resize(micro);
  targets_.resize(micro);
}

// Tokens the whole group consumes per step: the token count is a property of the model's training,
// not of one replica.
std::int64_t Trainer::tokens_per_step() const {
  return static_cast<std::int64_t>(config_.inner.batch_per_replica) * grad_accum_ * config_.model.seq_len *
         slot_.world;
}

void Trainer::fast_forward(std::int64_t step) {
  for (; state_.step < step; ++state_.step) {
    for (int micro = 0; micro < grad_accum_; ++micro) next_batch();
    state_.tokens += tokens_per_step();
  }
  state_.data = sampler_.position();
}

StepResult Trainer::step() {
  MERIDIAN_CHECK(!undo_.held, "a step after one whose all-gather failed, at step ", state_.step,
                 ": the group must heal (or undo it) first");
  StepResult r;
  r.step = state_.step;
  r.lr = lr_at(schedule_, state_.step) * state_.lr_scale;
  // The injected spike hits the first pass only: after a rollback the same step runs clean, as a
  // transient fault would.
  const auto& g = config_.guard;
  if (g.inject_lr_step >= 0 && state_.step >= g.inject_lr_step && state_.step < g.inject_lr_step + g.inject_lr_steps &&
      state_.rollbacks == 0) {
    r.lr *= g.inject_lr_factor;
    r.lr_injected = true;
  }
  if ((device_ ? device_step(r) : cpu_step(r)) == Update::NonFinite) return r;
  ++state_.step;
  state_.tokens += tokens_per_step();
  state_.data = sampler_.position();
  return r;
}

Trainer::Update Trainer::cpu_step(StepResult& r) {
  const int accum = grad_accum_;
  if (releases_grads()) zero_and_release(model_->grads());
  else model_->zero_grads();
  first_parts_ = false;
  if (shards_weights()) begin_sharded_step();
  double loss_sum = 0;
  // Stage 2: backward's ranges (a layer each, and the tiny final norm) are reduced in runs of at
  // least kMinReduceRange elements where they are adjacent, so small layers share one collective.
  std::size_t reduced = 0;
  ShardRange pending;
  const auto reduce_pending = [&] {
    if (pending.count == 0) return;
    slot_.reduce_range(model_->grads(), pending);
    release_outside_part(model_->grads(), pending);
    reduced += pending.count;
    pending = {};
  };
  for (int micro = 0; micro < accum; ++micro) {
    next_batch();
    loss_sum += model_->forward(inputs_.data(), targets_.data(), config_.inner.batch_per_replica);
    LanguageModel<float>::GradsReady ready;
    if (releases_grads() && micro == accum - 1)
      ready = [&](std::size_t offset, std::size_t count) {
        if (pending.count > 0 && offset + count != pending.offset) reduce_pending();
        pending = {offset, count + pending.count};
        if (pending.count >= kMinReduceRange) reduce_pending();
      };
    else if (slot_.bucket_ready && micro == accum - 1)
      ready = [&](std::size_t offset, std::size_t count) { slot_.bucket_ready(model_->grads().subspan(offset, count)); };
    model_->backward(1.0f / static_cast<float>(accum), ready);
  }
  reduce_pending();
  MERIDIAN_CHECK(!releases_grads() || reduced == param_count(), "backward reported ", reduced, " of ", param_count(),
                 " gradients final");
  r.loss = loss_sum / accum;
  if (slot_.reduce) slot_.reduce(model_->grads(), r.loss);
  if (slot_.shard) {
    // Only this replica's part of the gradients is reduced: it is what the update reads.
    r.grad_norm = clip_grad_norm(model_->grads(), *slot_.shard, config_.inner.clip, slot_.gather_unit_sums);
    if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) return Update::NonFinite;
    sharded_update(static_cast<float>(r.lr));
    return Update::Applied;
  }
  r.grad_norm = clip_grad_norm(model_->grads(), config_.inner.clip);
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) return Update::NonFinite;
  if (config_.inner.optimizer == JobConfig::Inner::Optimizer::Sgd)
    sgd_step(model_->layout(), model_->params(), model_->grads(), static_cast<float>(r.lr),
             static_cast<float>(config_.inner.weight_decay));
  else {
    // Muon's matrices first, with their momentum in AdamW's first moment; then AdamW the rest.
    if (muon_) muon_->step(model_->params(), model_->grads(), opt_.m(), static_cast<float>(r.lr));
    opt_.step(model_->params(), model_->grads(), static_cast<float>(r.lr));
  }
  return Update::Applied;
}

const AdamW& Trainer::optimizer() const {
  fetch_from_device(true);
  return opt_;
}

Trainer::Update Trainer::device_step(StepResult& r) {
  send_to_device_if_changed();
  const int accum = grad_accum_;
  device_->zero_grads();
  double loss_sum = 0;
  for (int micro = 0; micro < accum; ++micro) {
    next_batch();
    loss_sum += device_->forward_backward(inputs_.data(), targets_.data(), config_.inner.batch_per_replica,
                                          1.0f / static_cast<float>(accum));
  }
  r.loss = loss_sum / accum;
  if (slot_.reduce) {
    // The group's collectives take host buffers (Gloo; NCCL stages them through its own device
    // buffer), so the gradients make one round trip; model_->grads() is the host staging buffer.
    device_->download_grads(model_->grads());
    if (slot_.bucket_ready) slot_.bucket_ready(model_->grads());
    slot_.reduce(model_->grads(), r.loss);
    device_->upload_grads(model_->grads());
  }
  const auto norm = device_->clip(config_.inner.clip);
  if (const LossScaler* scaler = device_->loss_scaler()) {
    r.loss_scale = scaler->scale();
    r.loss_scale_floor = scaler->options().min_scale;
  }
  if (!norm) {
    r.skipped = true;
    return Update::Skipped;
  }
  r.grad_norm = *norm;
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) return Update::NonFinite;
  device_->adamw(static_cast<float>(r.lr));
  host_behind_ = moments_behind_ = true;
  return Update::Applied;
}

void Trainer::next_batch() {
  sampler_.next_group_batch(config_.inner.batch_per_replica, slot_.rank, slot_.world, inputs_.data(),
                            targets_.data());
}

LanguageModel<float>& Trainer::model() {
  ensure_whole_weights();
  if (device_) {
    fetch_from_device(false);
    device_behind_ = true;
  }
  return *model_;
}

std::uint64_t Trainer::params_hash() {
  ensure_whole_weights();
  if (!device_) return kernels::chunked_hash64(model_->params().data(), model_->params().size_bytes());
  send_to_device_if_changed();
  return device_->params_hash();
}

void Trainer::fetch_from_device(bool with_moments) const {
  if (!device_) return;
  MERIDIAN_CHECK(!(host_behind_ && device_behind_), "the host and the device both hold changes to the weights");
  if (host_behind_) device_->download_params(model_->params());
  host_behind_ = false;
  if (with_moments && moments_behind_) opt_.set_steps_taken(device_->download_moments(opt_.m(), opt_.v()));
  if (with_moments) moments_behind_ = false;
}

void Trainer::send_to_device_if_changed() {
  if (!device_behind_) return;
  device_->upload_params(model_->params());
  device_behind_ = false;
}

double Trainer::validation_loss() {
  if (!device_) return evaluate(*model_, data_.val, config_.inner.batch_per_replica, config_.log.eval_windows).loss;
  send_to_device_if_changed();
  const BatchLoss loss = [&](const std::int32_t* inputs, const std::int32_t* targets, int B) {
    return device_->loss(inputs, targets, B);
  };
  return evaluate(loss, config_.model.seq_len, data_.val, config_.inner.batch_per_replica, config_.log.eval_windows)
      .loss;
}

Checkpoint Trainer::snapshot() const { return snapshot_of(true); }

Checkpoint Trainer::snapshot_meta() const { return snapshot_of(false); }

std::uint64_t Trainer::state_fingerprint(bool with_moments, bool with_weights) {
  MERIDIAN_CHECK(!extras_.save || extras_.fingerprint, "a trainer's extras save records but have no fingerprint");
  fetch_from_device(true);
  const auto meta = encode_checkpoint(snapshot_of(false, false));
  const std::uint64_t parts[] = {with_weights ? hash64(std::span<const float>(model_->params())) : 0,
                                 with_moments ? hash64(std::span<const float>(opt_.m())) : 0,
                                 with_moments ? hash64(std::span<const float>(opt_.v())) : 0,
                                 hash64(meta.data(), meta.size()), extras_.fingerprint ? extras_.fingerprint() : 0};
  return hash64(std::span<const std::uint64_t>(parts));
}

Checkpoint Trainer::snapshot_of(bool bulk, bool extras) const {
  if (bulk) ensure_whole_weights();
  fetch_from_device(true);
  Checkpoint out = bulk ? encode_train_state(config_.model, model_->params(), opt_, state_, to_toml(config_))
                        : encode_train_meta(config_.model, opt_, state_, to_toml(config_));
  if (const LossScaler* scaler = device_ ? device_->loss_scaler() : nullptr) {
    out.put_value<double>("fp16.loss_scale", scaler->scale());
    out.put_value<std::int64_t>("fp16.clean_steps", scaler->clean_steps());
    out.put_value<std::int64_t>("fp16.skipped_steps", scaler->skipped_steps());
  }
  if (tokenizer_) put_tokenizer(out, *tokenizer_);
  if (extras && extras_.save) extras_.save(out);
  return out;
}

Trainer::Bulk Trainer::bulk() {
  fetch_from_device(true);
  return {model_->params(), opt_.m(), opt_.v()};
}

void Trainer::restore(const Checkpoint& state, const std::string& source) {
  if (state.has("params.part")) return restore_held_part(state, source);
  state_ = decode_train_state(state, source, config_.model, model_->params(), opt_);
  restored(state);
}

void Trainer::restore_meta(const Checkpoint& meta, const std::string& source) {
  state_ = decode_train_meta(meta, source, config_.model, opt_);
  restored(meta);
}

void Trainer::restored(const Checkpoint& state) {
  undo_.held = undo_.undoable = false;
  weights_whole_ = true;  // a restore writes every weight
  first_parts_ = false;
  if (device_) {
    device_->upload_params(model_->params());
    device_->upload_moments(opt_.m(), opt_.v(), opt_.steps_taken());
    // A state from another precision (or from before fp16) has no scale: the scaler starts afresh.
    if (LossScaler* scaler = device_->loss_scaler(); scaler && state.has("fp16.loss_scale"))
      scaler->restore(static_cast<float>(state.get_value<double>("fp16.loss_scale")),
                      static_cast<int>(state.get_value<std::int64_t>("fp16.clean_steps")),
                      state.get_value<std::int64_t>("fp16.skipped_steps"));
    host_behind_ = moments_behind_ = device_behind_ = false;
  }
  sampler_.seek(state_.data);
  if (extras_.restore) extras_.restore(state);
}

void Trainer::restore_optimizer(const Checkpoint& state, const std::string& source) {
  decode_optimizer_state(state, source, opt_);
}

void Trainer::set_guard_state(double lr_scale, std::int64_t rollbacks) {
  MERIDIAN_CHECK(std::isfinite(lr_scale) && lr_scale > 0 && rollbacks >= 0, "lr_scale=", lr_scale,
                 " rollbacks=", rollbacks);
  state_.lr_scale = lr_scale;
  state_.rollbacks = rollbacks;
}

void Trainer::set_slot(ReplicaSlot slot, int grad_accum) {
  MERIDIAN_CHECK(slot.world >= 1 && slot.rank >= 0 && slot.rank < slot.world && grad_accum >= 1, "rank=", slot.rank,
                 " world=", slot.world, " grad_accum=", grad_accum);
  check_slot(slot, param_count(), device_ != nullptr);
  if (slot.shard.value_or(ShardRange{0, param_count()}) != opt_.shard()) {
    opt_ = reshard(opt_, config_, model_->layout(), slot.shard);
    undo_ = PartUndo{};  // of the old part: a heal takes the state from elsewhere now
  }
  slot_ = std::move(slot);
  grad_accum_ = grad_accum;
  install_weights_hook();
}

void Trainer::restore_moments(const CheckpointParts& parts, ShardRange range) {
  MERIDIAN_CHECK(range.end() <= param_count() && parts.total() == param_count(), "moments ", range.offset, "+",
                 range.count, " of a model of ", param_count(), " from a checkpoint of ", parts.total());
  if (range != opt_.shard()) {
    opt_ = reshard(opt_, config_, model_->layout(),
                   range.count == param_count() ? std::nullopt : std::optional<ShardRange>(range));
    undo_ = PartUndo{};
  }
  decode_optimizer_state(parts.moments(range.offset, range.count), parts.path().string(), opt_);
  if (device_) device_->upload_moments(opt_.m(), opt_.v(), opt_.steps_taken());
  moments_behind_ = false;
}

void Trainer::save_checkpoint(bool write) {
  if (slot_.shard && config_.checkpoint.per_replica) return save_checkpoint_in_parts(write);
  std::vector<float> m, v;
  if (slot_.shard) {
    m.assign(param_count(), 0.0f);
    v.assign(param_count(), 0.0f);
    std::copy(opt_.m().begin(), opt_.m().end(), m.begin() + static_cast<std::ptrdiff_t>(slot_.shard->offset));
    std::copy(opt_.v().begin(), opt_.v().end(), v.begin() + static_cast<std::ptrdiff_t>(slot_.shard->offset));
    slot_.gather(m);
    slot_.gather(v);
  }
  ensure_whole_weights();  // every member: at stage 3 the weights are gathered too
  // Last before the write: no collective between what the extras gathered and the save that takes it.
  if (extras_.gather) extras_.gather();
  if (!write || !sound_to_write()) return;
  Checkpoint out = snapshot();
  if (slot_.shard) put_whole_moments(out, m, v);
  CheckpointStore store(env_, config_.job.run_dir / "checkpoints", config_.checkpoint.keep);
  const auto path = store.save(state_.step, out);
  log_.event("checkpoint", {{"step", state_.step}, {"path", path.string()}});
  if (extras_.written) extras_.written();
}

bool Trainer::sound_to_write() {
  const std::string why = extras_.unsound ? extras_.unsound() : std::string();
  if (!why.empty()) log_.event("checkpoint_skipped", {{"step", state_.step}, {"why", why}});
  return why.empty();
}

TrainSummary Trainer::run(std::int64_t stop_after) {
  TrainSummary summary;
  if (try_resume()) summary.resumed_from_step = state_.step;
  const std::int64_t total = config_.inner.steps;
  const std::int64_t end = stop_after > 0 ? std::min(total, state_.step + stop_after) : total;
  log_.event("start", {{"step", state_.step},
                       {"steps", total},
                       {"model", describe(config_.model)},
                       {"params", model_->layout().total()},
                       {"train_tokens", data_.train.tokens()},
                       {"val_tokens", data_.val.size()}});
  const double t0 = now_();
  const std::int64_t first_step = state_.step;
  double window_t = t0;
  std::int64_t window_tokens = 0;
  StepResult last;
  std::optional<TextSampler> sampler;  // at the first sample
  std::optional<DivergenceGuard> guard;
  if (config_.guard.enabled) {
    guard.emplace(config_.guard, DivergenceGuard::Mode::Recover, log_, nlohmann::json{{"site", "local"}, {"replica", 0}});
    guard->reset(*this, true);
  }
  double computing_s = 0;  // in steps: what evaluations and checkpoints leave of the wall time
  while (state_.step < end) {
    const double t_step = now_();
    last = step();
    computing_s += now_() - t_step;
    if (guard) {
      if (guard->after_step(*this, last) == DivergenceGuard::Outcome::RolledBack) {
        if (progress_)
          progress_->line("divergence at step " + std::to_string(last.step) + ": rolled back to step " +
                          std::to_string(state_.step) + ", learning rate x" + std::to_string(state_.lr_scale));
        continue;
      }
    } else if (!std::isfinite(last.loss) || !std::isfinite(last.grad_norm)) {
      log_.event("nonfinite", {{"step", last.step}, {"loss", std::to_string(last.loss)}});
      throw make_error(ErrorKind::Data, "training diverged at step ", last.step, ": loss ", last.loss,
                       ", gradient norm ", last.grad_norm,
                       "; the last checkpoint is kept (lower inner.lr or raise inner.warmup_steps)");
    }
    window_tokens += tokens_per_step();
    const std::int64_t done = state_.step;
    if (done % config_.log.every == 0 || done == end) {
      const double now = now_();
      const double tok_s = window_tokens / std::max(1e-9, now - window_t);
      const double eta = (end - done) * (now - t0) / std::max<std::int64_t>(1, done - first_step);
      log_.metric({{"time", unix_time_now()}, {"site", "local"}, {"replica", 0}, {"step", done}, {"version", 0},
                   {"loss", last.loss}, {"lr", last.lr}, {"grad_norm", last.grad_norm}, {"tokens", state_.tokens},
                   {"tok_s", tok_s}, {"utilization", computing_s / std::max(1e-9, now - t0)}});
      if (progress_) progress_->update(ProgressState{done, total, last.loss, tok_s, eta});
      window_t = now;
      window_tokens = 0;
    }
    if (config_.log.eval_every > 0 && done % config_.log.eval_every == 0 && done != end) {
      const double val = validation_loss();
      log_.metric({{"time", unix_time_now()}, {"site", "local"}, {"replica", 0}, {"step", done}, {"version", 0},
                   {"val_loss", val}, {"tokens", state_.tokens}});
      if (progress_) progress_->line("step " + std::to_string(done) + ": val loss " + std::to_string(val));
    }
    if (config_.log.sample_every > 0 && done % config_.log.sample_every == 0) {
      if (!sampler) sampler.emplace(config_, tokenizer_);
      const TextSample sample = sampler->sample(model().params(), done);
      log_.event("sample", sample.fields());
      if (progress_)
        progress_->line("step " + std::to_string(done) +
                        " sample: " + (sample.error.empty() ? sample.text : sample.error));
    }
    if (config_.checkpoint.every > 0 && done % config_.checkpoint.every == 0 && done != end) save_checkpoint();
  }
  return finish_run(summary, first_step, t0, last);
}

TrainSummary Trainer::finish_run(TrainSummary summary, std::int64_t first_step, double t0, const StepResult& last) {
  const double wall = now_() - t0;
  summary.final_val_loss = validation_loss();
  summary.final_train_loss = last.loss;
  summary.steps = state_.step;
  summary.tokens = state_.tokens;
  summary.wall_s = wall;
  summary.tokens_per_s = (state_.step - first_step) * tokens_per_step() / std::max(1e-9, wall);
  if (state_.step > first_step) save_checkpoint();
  log_.metric({{"time", unix_time_now()}, {"site", "local"}, {"replica", 0}, {"step", state_.step}, {"version", 0},
               {"val_loss", summary.final_val_loss}, {"tokens", state_.tokens}});
  // The realised mix: windows taken from each data source, in [[data.source]] order.
  log_.event("end", {{"step", state_.step}, {"val_loss", summary.final_val_loss}, {"data_windows", state_.data.taken}});
  log_.summary({{"final_val_loss", summary.final_val_loss},
                {"final_train_loss", summary.final_train_loss},
                {"steps", summary.steps},
                {"tokens", summary.tokens},
                {"wall_s", summary.wall_s},
                {"tokens_per_s", summary.tokens_per_s},
                {"params", model_->layout().total()},
                {"model", describe(config_.model)},
                {"resumed_from_step", summary.resumed_from_step},
                {"rollbacks", state_.rollbacks},
                {"lr_scale", state_.lr_scale}});
  if (progress_) {
    progress_->finish();
    progress_->line("final val loss " + std::to_string(summary.final_val_loss) + " after " +
                    std::to_string(summary.tokens) + " tokens");
  }
  return summary;
}

}  // namespace meridian
