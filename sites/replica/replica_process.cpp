#include "sites/replica/replica_process.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "core/device/cuda_probe.hpp"
#include "core/io/stop_signals.hpp"
#include "core/util/error.hpp"
#include "core/util/hash.hpp"
#include "intrasite/comm/route_address.hpp"
#include "intrasite/group/protocol.hpp"
#include "intrasite/group/state_sync.hpp"
#include "intrasite/parallel/bucket_reducer.hpp"
#include "intrasite/parallel/data_parallel.hpp"
#include "sites/replica/exchange_options.hpp"

namespace meridian {
namespace {

// Micro-batches per step for a group of `world`: keep_batch keeps the global batch of the full
// site (count x grad_accum micro-batches) when it divides evenly, otherwise rounds up and says so.
int micro_batches_for(const JobConfig& c, int world) {
  if (c.replicas.on_failure == JobConfig::Replicas::OnFailure::Scale) return c.inner.grad_accum;
  const int total = c.replicas.count * c.inner.grad_accum;
  return std::max(1, (total + world - 1) / world);
}

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

// A replica of a site that shards AdamW's moments builds only the part its number keeps in a
// whole group (ReplicaSlot::moments_first): none holds them whole before its group forms. At stage
// 3 the weights too, where nothing needs them whole: in a one-site job, and across sites where the
// outer state is sharded in the weights' own units (it starts from the same part and mirror).
ReplicaSlot first_slot(const JobConfig& c, int replica) {
  ReplicaSlot slot;
  const bool outer_cut_alike = c.parallel.shard_outer && outer_shard_unit(c) == kShardUnit;
  if (c.parallel.zero_stage >= 1 && c.replicas.count > 1)
    slot.moments_first = ReplicaSlot::FirstPart{std::clamp(replica, 0, c.replicas.count - 1), c.replicas.count,
                                                c.parallel.zero_stage == 3 && (c.sites.size() < 2 || outer_cut_alike)};
  return slot;
}

std::optional<int> nccl_device(const Placement& p) { return p.nccl ? std::optional<int>(p.device.index) : std::nullopt; }

// Peak resident memory of this process, in bytes (Linux reports kilobytes).
std::int64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::int64_t>(usage.ru_maxrss) * 1024;
}

bool is_peer_failure(const Error& e) { return e.kind() == ErrorKind::Peer || e.kind() == ErrorKind::Timeout; }

// The collectives listen where this host reaches the store from: a site whose replicas span hosts
// forms its mesh over the network its store is on.
GlooOptions gloo_options(const JobConfig& c, const std::string& store_endpoint) {
  GlooOptions gloo;
  gloo.address = route_address_toward(endpoint_host(store_endpoint));
  gloo.timeout = std::chrono::milliseconds(c.replicas.collective_timeout_ms);
  return gloo;
}

}  // namespace

ReplicaProcess::ReplicaProcess(const ReplicaRun& run, Env& env, std::function<double()> now,
                               std::function<double()> wall, LeaveOnStop& stops)
    : run_(run),
      env_(env),
      now_(std::move(now)),
      times_(now_()),  // before the data is loaded: start-up counts from here
      log_(run.config.job.run_dir),
      store_(run.store_endpoint, run.store_secret),
      heartbeat_(run.store_endpoint, run.store_secret, run.id,
                 std::chrono::milliseconds(std::max(1, run.config.replicas.heartbeat_timeout_ms / 5))),
      trainer_(run.config, env, log_, nullptr, now_, first_slot(run.config, run.id),
               placement(run.config, run.site, run.id).device),
      exchange_(run.config, run.site, run.id, trainer_, log_, ExchangeClocks{now_, std::move(wall)}),
      figures_(times_.started()),
      mode_(store_),
      inbox_(store_, env,
             [this](const std::string& kind, nlohmann::json& result) {
               mode_.command(kind, result);
               if (!result.contains("error")) mode_.publish(turn_.leader, {{"step", trainer_.state().step}});
             }),
      group_(store_, run.id, gloo_options(run.config, run.store_endpoint), now_,
             nccl_device(placement(run.config, run.site, run.id))),
      guard_(run.config.guard, guard_mode(), log_, {{"site", run.site}, {"replica", run.id}},
             versions() ? DivergenceGuard::ToVersion([this](Trainer& t) {
               auto fields = exchange_.roll_back(t, group_.comm());
               figures_.discarded(fields["discarded_steps"].get<std::int64_t>());
               return fields;
             })
                        : DivergenceGuard::ToVersion()) {
  stops.on_stop([this] { exchange_.leave(); });
  exchange_.on_wait([this](const nlohmann::json& waiting) {
    const std::string text = waiting.dump();
    store_.set(site_keys::waiting(), std::as_bytes(std::span(text.data(), text.size())));
  });
  if (exchange_.active())
    trainer_.set_extras(
        {[this](Checkpoint& out) { exchange_.save(out); }, [this](const Checkpoint& in) { exchange_.restore(in); },
         [this] { exchange_.checkpointed(); }, [this] { exchange_.gather_for_checkpoint(group_.comm(), turn_.leader); },
         [this] { return exchange_.fingerprint(); }, [this](Checkpoint& part) { exchange_.save_part(part); },
         [this] { return exchange_.unsound_for_checkpoint(); }});
  inbox_.on_version_rollback(
      [this](Trainer& t, std::int64_t version, std::optional<double> scale) { return roll_back_to(t, version, scale); });
  inbox_.on_checkpoint_rollback([this](Trainer& t, const std::string& path) { return restore_checkpoint(t, path); });
}

// Across sites (DiLoCo, [guard] across_sites) a diverged site goes back to the newest version it
// holds, alone: the versions and rounds the sites share stay. Otherwise the guard only reports
// there, and a non-finite step still ends the run; the operator can still force the rollback.
DivergenceGuard::Mode ReplicaProcess::guard_mode() const {
  if (!exchange_.active()) return DivergenceGuard::Mode::Recover;
  return versions() && config().guard.across_sites ? DivergenceGuard::Mode::RecoverToVersion
                                                   : DivergenceGuard::Mode::DetectOnly;
}

nlohmann::json ReplicaProcess::roll_back_to(Trainer& t, std::int64_t version, std::optional<double> scale) {
  if (!versions())
    throw make_error(ErrorKind::Usage, "rollback --to v", version, ": ",
                     exchange_.active() ? "a synchronous job has no versions of its own to go back to"
                                        : "a one-site job has no versions");
  if (version != exchange_.state().version())
    throw make_error(ErrorKind::Usage, "rollback --to v", version, ": this site holds version ",
                     exchange_.state().version(),
                     version < exchange_.state().version()
                         ? " (going back to an older version would revert the whole job, which meridian does not do)"
                         : " (not that one yet)");
  return guard_.force_rollback(t, scale.value_or(t.state().lr_scale));
}

int ReplicaProcess::run() {
  resume();
  while (generation()) {
  }
  finish();
  return 0;
}

bool ReplicaProcess::generation() {
  const double t_join = now_();
  const bool rejoin = times_.training_began();
  const auto join_timeout = std::chrono::milliseconds(
      20 * std::max(config().replicas.heartbeat_timeout_ms, config().replicas.collective_timeout_ms));
  group_.join(turn_.next_generation, join_timeout);
  turn_.leader = group_.rank() == 0;
  std::unique_ptr<BucketReducer> overlap;
  auto s = data_slot();
  const bool sharded = config().parallel.zero_stage >= 1 && group_.size() > 1;
  if (sharded) shard_state(s, group_.comm(), trainer_.param_count(), config().parallel.zero_stage);
  const bool reduce_after_backward = sharded && config().parallel.zero_stage == 1;
  if (config().replicas.overlap_allreduce && group_.size() > 1) {
    overlap = std::make_unique<BucketReducer>(group_.comm());
    s.bucket_ready = [&overlap](std::span<float> bucket) { overlap->enqueue(bucket); };
  }
  // One collective for the gradients (or the buckets already in flight), one tiny one for the
  // loss and the "a newer generation is published" flag, so every member decides to switch
  // after the same step.
  s.reduce = [this, &overlap, sharded, reduce_after_backward](std::span<float> grads, double& loss) {
    if (overlap) overlap->wait();
    else if (reduce_after_backward) reduce_scatter_grads(group_.comm(), grads);
    else if (!sharded) group_.comm().allreduce(grads, ReduceOp::Mean);
    float control[3] = {static_cast<float>(loss), group_.newer_generation_published() ? 1.0f : 0.0f,
                        inbox_.newest(turn_.leader)};
    group_.comm().allreduce(std::span<float>(control, 3), ReduceOp::Sum);
    loss = control[0] / static_cast<float>(group_.size());
    turn_.switch_pending = control[1] > 0;
    turn_.ops_newest = static_cast<std::int64_t>(control[2]);
    if (exchange_.active() && exchange_.synchronous())
      exchange_.reduce_across_sites(group_.comm(), turn_.leader, trainer_.state().step, grads, loss);
  };
  turn_.switch_pending = false;
  try {
    joined(t_join, GroupPlace{std::move(s), micro_batches_for(config(), group_.size())});
    if (rejoin) times_.add(Part::Rejoin, now_() - t_join);
    if (mode_.state() == SiteMode::State::Drained) sit_out();
    train();
  } catch (const StateLost& e) {
    log_.event(
        "state_lost",
        {{"site", run_.site}, {"replica", run_.id}, {"generation", group_.generation().number}, {"error", e.what()}});
    throw;
  } catch (const Error& e) {
    if (!is_peer_failure(e)) throw;
    group_.report_failure();
    turn_.next_generation = group_.generation().number + 1;
    return true;
  }
  if (!turn_.switch_pending) return false;
  turn_.next_generation = group_.generation().number + 1;
  return true;
}

// A checkpoint written in parts stays on disk until the group has formed and each member knows its
// part (take_resumed_parts); the parts are read whole now only when they carry an outer state's
// slices and this job keeps it whole. A replica restarted beside running ones (its site's group
// formed without it) reads at once, before it asks to join, the part of the moments and of a
// sharded outer state its number keeps in a whole group, while the others train on: a cut that
// gives it another part leaves the rest to the heal, which takes them from the members holding them
// and from the checkpoint by range. (It used to read the whole checkpoint once the group had
// formed, while the others waited in the heal's first collective.)
void ReplicaProcess::resume() {
  auto loaded = trainer_.newest_checkpoint_head();
  if (!loaded) return;
  whole_unless_readable_by_parts(loaded->checkpoint);
  trainer_.resume_from(*loaded);
  resumed_parts_ = std::move(loaded->checkpoint.parts);
  if (resumed_parts_ && group_.site_group_formed()) {
    const int count = config().replicas.count, id = std::clamp(run_.id, 0, count - 1);
    nlohmann::json fields = {{"site", run_.site},    {"replica", run_.id},
                             {"step", loaded->step}, {"checkpoint", loaded->path.string()},
                             {"whole", false},       {"before_join", true}};
    fields.update(
        read_own_parts(trainer_, *resumed_parts_, ShardMap(trainer_.param_count(), count).part(id), id, count));
    log_.event("resumed_parts", fields);
    resumed_parts_.reset();
  }
  if (!resumed_parts_) resume_peak_rss_ = peak_rss_bytes();
}

// When every member resumed from the same checkpoint in parts, each reads its new part of the
// moments and of the outer state from the part files, and nobody holds the whole. Otherwise (they
// resumed from different checkpoints, or a member found none) the members that resumed read it
// whole, as they would an unsharded checkpoint: the heal then takes from the most advanced, and a
// whole outer state read so stands in for parts its group lost (outer_cut.hpp). One sum.
void ReplicaProcess::take_resumed_parts(const GroupPlace& place) {
  std::vector<float> steps(static_cast<std::size_t>(group_.size()), 0.0f);  // each member's + 1; 0: none
  if (resumed_parts_) steps[static_cast<std::size_t>(group_.rank())] = static_cast<float>(resumed_parts_->step() + 1);
  group_.comm().allreduce(steps, ReduceOp::Sum);
  if (!resumed_parts_) return;
  const bool together = std::all_of(steps.begin(), steps.end(), [&](float s) { return s == steps.front(); });
  nlohmann::json fields = {{"site", run_.site},
                           {"replica", run_.id},
                           {"step", resumed_parts_->step()},
                           {"checkpoint", resumed_parts_->path().string()},
                           {"whole", !together}};
  if (together) {
    fields.update(read_own_parts(trainer_, *resumed_parts_,
                                 place.slot.shard.value_or(ShardRange{0, trainer_.param_count()}), group_.rank(),
                                 group_.size()));
  } else {
    trainer_.restore(resumed_parts_->read_whole(), resumed_parts_->path().string());
  }
  log_.event("resumed_parts", fields);
  resumed_parts_.reset();
  resume_peak_rss_ = peak_rss_bytes();
}

// An operator's rollback to a checkpoint, applied by every member at the same step: of one
// written in parts each reads the leader's file and its own part of the moments and of a sharded
// outer state, as a resume does (the fields say which, and how many elements of each).
nlohmann::json ReplicaProcess::restore_checkpoint(Trainer& t, const std::string& path) {
  CheckpointHead read = read_checkpoint_head(env_, path);
  whole_unless_readable_by_parts(read);
  t.restore_head(read, path);
  if (!read.parts) return {{"read", "whole"}};
  auto fields = read_own_parts(t, *read.parts, t.moments_held(), group_.rank(), group_.size());
  fields["read"] = "parts";
  return fields;
}

// Parts that carry an outer state's slices while this job keeps the state whole: read whole.
void ReplicaProcess::whole_unless_readable_by_parts(CheckpointHead& checkpoint) const {
  if (checkpoint.parts && checkpoint.parts->has_slices() && !config().parallel.shard_outer)
    checkpoint = {checkpoint.parts->read_whole(), std::nullopt};
}

// This member's part of the moments (`moments`) and of a sharded outer state (rank `rank` of
// `ranks`), from `parts`: the elements of each it read.
nlohmann::json ReplicaProcess::read_own_parts(Trainer& t, const CheckpointParts& parts, ShardRange moments, int rank,
                                              int ranks) {
  t.restore_moments(parts, moments);
  return {{"moments_elements", moments.count}, {"outer_elements", exchange_.restore_from_parts(parts, rank, ranks)}};
}

// Every replica of every site reads its own windows of the data.
ReplicaSlot ReplicaProcess::data_slot() const {
  ReplicaSlot s;
  s.rank = group_.rank();
  s.world = group_.size();
  if (exchange_.active()) {
    s.rank = exchange_.data_offset() + std::min(group_.rank(), config().replicas.count - 1);
    s.world = exchange_.data_replicas();
  }
  return s;
}

// After a (re)join: the members share the healthiest state, the site's mode and the operator
// commands they applied.
void ReplicaProcess::joined(double t_join, GroupPlace place) {
  take_resumed_parts(place);
  const auto heal = sync_state(group_.comm(), trainer_, std::move(place));
  log_.event("joined", {{"site", run_.site},
                        {"replica", run_.id},
                        {"generation", group_.generation().number},
                        {"rank", group_.rank()},
                        {"size", group_.size()},
                        {"transport", group_.transport()},
                        {"grad_accum", trainer_.grad_accum()},
                        {"global_batch", trainer_.grad_accum() * group_.size() * config().inner.batch_per_replica},
                        {"step", heal.step},
                        {"heal_source_rank", heal.source_rank},
                        {"heal_bytes", heal.bytes},
                        {"healed", heal.changed},
                        {"moments_lost", heal.moments_lost},
                        {"moments_from_checkpoint", heal.moments_from_checkpoint},
                        {"weights_lost", heal.weights_lost},
                        {"checkpoint_step", heal.checkpoint_step},
                        {"moments_scratch_bytes", heal.moments_scratch_bytes},
                        {"first_parts_kept", heal.first_parts_kept},
                        {"ms", 1000 * (now_() - t_join)}});
  mode_.agree(group_.comm(), turn_.leader);
  exchange_.pause_outer(mode_.outer_paused());
  if (mode_.state() != SiteMode::State::Drained) exchange_.join(group_.comm(), turn_.leader, trainer_);
  guard_.reset(trainer_, turn_.leader);
  if (config().parallel.zero_stage >= 1) sdc_.forget();  // its agreed state is of the old part
  figures_.joined(now_() - t_join);
  agree_on_commands();
  if (first_join_peak_rss_ == 0) first_join_peak_rss_ = peak_rss_bytes();
}

// Each member's applied command count (+1; 0: a fresh replica) at its rank, the filed count last:
// one sum gathers them all, and the group goes on from where its most advanced member was.
void ReplicaProcess::agree_on_commands() {
  std::vector<float> counts(static_cast<std::size_t>(group_.size()) + 1, 0.0f);
  if (const auto a = inbox_.applied()) counts[static_cast<std::size_t>(group_.rank())] = static_cast<float>(*a + 1);
  counts.back() = inbox_.newest(turn_.leader);
  group_.comm().allreduce(std::span<float>(counts), ReduceOp::Sum);
  std::vector<std::optional<std::int64_t>> applied;
  for (std::size_t r = 0; r + 1 < counts.size(); ++r)
    applied.push_back(counts[r] > 0 ? std::optional(static_cast<std::int64_t>(counts[r]) - 1) : std::nullopt);
  inbox_.skip_to(OpsInbox::resume_after(applied, static_cast<std::int64_t>(counts.back())));
}

// Operator commands up to `newest`, in the order filed.
bool ReplicaProcess::apply_commands(std::int64_t newest) {
  const auto applied = inbox_.apply(newest, trainer_, turn_.leader);
  for (auto done : applied.done)
    if (turn_.leader) {
      done.update({{"site", run_.site}, {"replica", run_.id}, {"version", exchange_.state().version()}});
      log_.event("ops_applied", std::move(done));
    }
  exchange_.pause_outer(mode_.outer_paused());
  return applied.restored;
}

// Drained: the group sits the job out until the operator resumes it (then it comes back as a
// site that was away does), it regroups, or the other sites end the job.
void ReplicaProcess::sit_out() {
  const double t_drained = now_();
  const auto from_version = exchange_.state().version();
  const auto from_step = trainer_.state().step;
  const ParkHooks hooks{[this] { return group_.newer_generation_published(); },
                        [this] { return static_cast<std::int64_t>(inbox_.newest(turn_.leader)); },
                        [this](std::int64_t newest) {
                          if (apply_commands(newest)) guard_.reset(trainer_, turn_.leader);
                        },
                        [this] { return exchange_.job_over(); }, now_};
  switch (park(group_.comm(), turn_.leader, mode_, hooks)) {
    case Parked::Regroup: turn_.switch_pending = true; return;
    case Parked::JobOver:
      if (turn_.leader)
        log_.event("drain_job_over", {{"site", run_.site}, {"replica", run_.id}, {"step", from_step},
                                      {"version", from_version}, {"drained_s", now_() - t_drained}});
      turn_.job_over = true;
      return;
    case Parked::Resumed: break;
  }
  exchange_.rejoin(group_.comm(), turn_.leader, trainer_);
  const nlohmann::json detail = {{"site", run_.site}, {"replica", run_.id}, {"from_step", from_step},
                                 {"step", trainer_.state().step}, {"from_version", from_version},
                                 {"version", exchange_.state().version()}, {"drained_s", now_() - t_drained}};
  mode_.resumed(turn_.leader, detail);
  if (turn_.leader) log_.event("resumed", detail);
}

void ReplicaProcess::train() {
  while (trainer_.state().step < config().inner.steps && !turn_.switch_pending && !turn_.job_over) step();
}

void ReplicaProcess::step() {
  const double t_step = now_();
  times_.training_begins(t_step);
  StepResult r;
  try {
    r = trainer_.step();
    const double step_s = now_() - t_step;
    times_.add(Part::Steps, step_s);
    figures_.computed(step_s);
  } catch (const Error& e) {
    if (is_peer_failure(e))
      log_.event("collective_failed", {{"site", run_.site},
                                       {"replica", run_.id},
                                       {"generation", group_.generation().number},
                                       {"step", trainer_.state().step},
                                       {"error", e.what()},
                                       {"ms", 1000 * (now_() - t_step)}});
    throw;
  }
  if (config().guard.enabled) {
    // Across sites the steps go on (only the weights went back): the round still ends on time.
    if (guard_.after_step(trainer_, r) == DivergenceGuard::Outcome::RolledBack &&
        guard_mode() == DivergenceGuard::Mode::Recover) {
      figures_.discarded(r.step + 1 - trainer_.state().step);
      return;
    }
  } else if (!std::isfinite(r.loss)) {
    throw make_error(ErrorKind::Data, "replica ", run_.id, ": non-finite loss at step ", r.step);
  }
  if (apply_commands(turn_.ops_newest)) {
    guard_.reset(trainer_, turn_.leader);
    return;
  }
  const auto done = trainer_.state().step;
  const bool last = done == config().inner.steps;
  const bool draining = mode_.state() == SiteMode::State::Draining && !last;
  log_step(r, done);
  exchange_step(done, last, draining);
  trainer_.drop_gathered_weights();  // stage 3: what the round gathered goes before anything is measured
  eval_step(done);
  sample_step(done);
  sdc_step(done);
  if (config().checkpoint.every > 0 && done % config().checkpoint.every == 0)
    timed(Part::Checkpoint, [this] {
      trainer_.save_checkpoint(turn_.leader);
      periodic_saved_ = {trainer_.state().step, exchange_.state().version()};
    });
  if (draining) drain_step(done);
}

void ReplicaProcess::log_step(const StepResult& r, std::int64_t done) {
  if (!turn_.leader || (done % config().log.every != 0 && done != config().inner.steps)) return;
  timed(Part::Log, [&] {
    const double computing_s = times_.seconds(Part::Steps);
    if (config().ops.metrics) figures_.publish(store_, exchange_, trainer_, r, computing_s, now_());
    log_.metric({{"time", unix_time_now()}, {"site", run_.site}, {"replica", run_.id}, {"step", done},
                 {"version", exchange_.state().version()}, {"generation", group_.generation().number},
                 {"loss", r.loss}, {"lr", r.lr}, {"grad_norm", r.grad_norm}, {"tokens", trainer_.state().tokens},
                 {"utilization", computing_s / std::max(1e-9, now_() - times_.started())}});
  });
}

// The exchange's own clocks split its calls into waits on other sites, applied versions and the
// rest: a round end's encoding and sending, or the per-step look.
void ReplicaProcess::exchange_step(std::int64_t done, bool last, bool draining) {
  const double t0 = now_(), waited0 = exchange_.waited_s(), applied0 = exchange_.applied_s();
  const bool round_end = exchange_.round_ends(done);
  // Paused, a round's steps go into the next round sent. The last round is always sent (so every
  // site ends on one version), and so is a draining site's.
  const bool hold = mode_.outer_paused() && !last && !draining;
  exchange_.after_step(group_.comm(), turn_.leader, trainer_, done, last, hold);
  const double waited = exchange_.waited_s() - waited0, applied = exchange_.applied_s() - applied0;
  times_.add(last ? Part::EndWait : Part::CrossSiteWait, waited);
  times_.add(Part::Apply, applied);
  times_.add(round_end ? Part::RoundEnd : Part::Poll, now_() - t0 - waited - applied);
}

// Mid-run validation of what the job holds (the global weights, right after a round) for the loss curves.
// Under ZeRO stage 3 every member evaluates, as the forward gathers each layer's weights.
void ReplicaProcess::eval_step(std::int64_t done) {
  const auto& log = config().log;
  if (log.eval_every <= 0 || done % log.eval_every != 0 || done == config().inner.steps) return;
  if (!turn_.leader && !trainer_.shards_weights()) return;
  const double val = timed(Part::Eval, [this] { return trainer_.validation_loss(); });
  if (!turn_.leader) return;
  log_.metric({{"time", unix_time_now()}, {"site", run_.site}, {"replica", run_.id}, {"step", done},
               {"version", exchange_.state().version()}, {"val_loss", val}, {"tokens", trainer_.state().tokens}});
}

// The leader writes what the site's model says at this step (zero_stage 3, which keeps no weights
// whole, is refused with sample_every by the job's validation).
void ReplicaProcess::sample_step(std::int64_t done) {
  if (!turn_.leader || config().log.sample_every <= 0 || done % config().log.sample_every != 0) return;
  if (!sampler_) sampler_.emplace(config(), trainer_.tokenizer());
  const TextSample sample =
      timed(Part::Eval, [this, done] { return sampler_->sample(trainer_.model().params(), done); });
  nlohmann::json fields = sample.fields();
  fields["site"] = run_.site;
  fields["replica"] = run_.id;
  fields["version"] = exchange_.state().version();
  log_.event("sample", fields);
}

// Alone in its group a replica has nobody to compare its weights with (across sites every version
// is checked against its commit's hash instead): no check, and no copy of the state for a rollback
// that no disagreement can call for.
void ReplicaProcess::sdc_step(std::int64_t done) {
  if (config().replicas.sdc_every <= 0 || done % config().replicas.sdc_every != 0 || group_.size() <= 1) return;
  const double t_check = now_();
  const auto found = timed(Part::Sdc, [this] { return sdc_.check(group_.comm(), trainer_); });
  if (found.verdict.agree) return;
  // The agreed state a rollback restored holds no part of a sharded outer state: the in-flight
  // round is dropped onto the version held, as the divergence guard's way back does.
  if (found.verdict.rollback && config().parallel.shard_outer) exchange_.roll_back(trainer_, group_.comm());
  figures_.sdc_finding();
  std::vector<std::string> hashes;
  for (auto h : found.hashes) hashes.push_back(std::to_string(h));
  std::vector<int> odd;
  for (int r : found.verdict.odd_ranks) odd.push_back(group_.generation().members[r]);
  log_.event("sdc_detected",
             {{"site", run_.site}, {"replica", run_.id}, {"step", done}, {"hashes", hashes}, {"odd_replicas", odd}});
  log_.event("sdc_repaired", {{"site", run_.site},
                              {"replica", run_.id},
                              {"how", found.verdict.rollback ? "rollback" : "healed from majority"},
                              {"step", found.step},
                              {"ms", 1000 * (now_() - t_check)}});
}

// Drain: across sites once the round is sent (and merged), alone after this step.
void ReplicaProcess::drain_step(std::int64_t done) {
  if (exchange_.active() && !exchange_.round_ends(done)) return;
  nlohmann::json detail = {{"site", run_.site}, {"replica", run_.id}, {"step", done}};
  if (exchange_.active()) detail.update(exchange_.drain(group_.comm(), turn_.leader, trainer_));
  else trainer_.save_checkpoint(turn_.leader);
  mode_.drained(turn_.leader, detail);
  if (turn_.leader) log_.event("drained", detail);
  sit_out();
}

// What this replica holds for the model, per parameter, from the buffers themselves: the
// trainer's (weights, gradients, moments), the outer state's, and the guards' kept states.
nlohmann::json ReplicaProcess::memory_ledger() const {
  const nlohmann::json parts = {{"trainer", training_state_bytes_},
                                {"undo", trainer_.undo_bytes()},
                                {"outer", exchange_.held_bytes()},
                                {"sdc_guard", sdc_.held_bytes()},
                                {"divergence_guard", guard_.held_bytes()}};
  std::size_t total = 0;
  for (const auto& [name, bytes] : parts.items()) total += bytes.get<std::size_t>();
  return {{"state_bytes_per_param", static_cast<double>(total) / static_cast<double>(trainer_.param_count())},
          {"state_bytes", parts},
          {"params", trainer_.param_count()},
          {"moments_elements", trainer_.moments_held().count},
          {"zero_stage", config().parallel.zero_stage},
          {"recompute", to_string(config().parallel.recompute)},
          {"activation_bytes", trainer_.activation_bytes()},
          {"replicas", group_.size()},
          {"peak_rss_bytes", peak_rss_bytes()},
          {"training_peak_rss_bytes", training_peak_rss_},
          {"resume_peak_rss_bytes", resume_peak_rss_},
          {"first_join_peak_rss_bytes", first_join_peak_rss_},
          {"whole_weight_gathers", trainer_.whole_weight_gathers()}};
}

void ReplicaProcess::finish() {
  const double t_trained = now_();
  training_peak_rss_ = peak_rss_bytes();
  training_state_bytes_ = trainer_.state_bytes();  // before the hash and the checkpoint gather stage 3's weights
  const auto params_hash = hash64(std::span<const float>(trainer_.model().params()));
  try {
    // Every member holds the same step and version, so all of them skip or save together.
    if (periodic_saved_ != std::pair{trainer_.state().step, exchange_.state().version()})
      trainer_.save_checkpoint(group_.rank() == 0);
  } catch (const Error& e) {  // under a shard the moments are gathered, and a member may be gone
    if (!is_peer_failure(e)) throw;
    log_.event("checkpoint_failed", {{"site", run_.site}, {"replica", run_.id}, {"step", trainer_.state().step},
                                     {"error", e.what()}});
  }
  if (group_.rank() == 0) {
    const double t_eval = now_();
    const double val = trainer_.validation_loss();
    const double eval_s = now_() - t_eval;
    times_.add(Part::Eval, eval_s);
    log_.metric({{"time", unix_time_now()}, {"site", run_.site}, {"replica", run_.id}, {"step", trainer_.state().step},
                 {"version", exchange_.state().version()}, {"val_loss", val}, {"tokens", trainer_.state().tokens}});
    auto summary = exchange_.summary(trainer_.param_count());
    summary["final_val_loss"] = val;
    summary["steps"] = trainer_.state().step;
    summary["rollbacks"] = trainer_.state().rollbacks;
    summary["lr_scale"] = trainer_.state().lr_scale;
    summary["tokens"] = trainer_.state().tokens;
    summary["params_hash"] = std::to_string(params_hash);
    summary["memory"] = memory_ledger();  // the leader's; every replica's is in its replica_done event
    // compute_utilization: time in inner steps over the whole process; training_utilization:
    // over the training phase (docs/wan.md). Finishing: all after training but the evaluation.
    const double t_end = now_();
    times_.add(Part::Finish, t_end - t_trained - eval_s);
    summary.update(times_.summary(t_end));
    log_.summary(summary);
  }
  log_.event("replica_done", {{"site", run_.site},
                              {"replica", run_.id},
                              {"step", trainer_.state().step},
                              {"generation", group_.generation().number},
                              {"params_hash", std::to_string(params_hash)},
                              {"memory", memory_ledger()},
                              {"lane", exchange_.lane_figures()},
                              {"group_bytes_received", exchange_.group_bytes_received()}});
  store_.add(site_keys::done(run_.id), 1);  // how an agent that did not start this process learns it ended
}

}  // namespace meridian
