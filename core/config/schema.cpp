// The schema: which keys exist, their types and ranges, and the typed JobConfig they make.
// Keys are known by being read here, so the list of valid keys cannot drift from the reader.
#include <optional>
#include <string>

#include "core/config/inner_schedule.hpp"
#include "core/config/resolver.hpp"

namespace fs = std::filesystem;

namespace meridian::config_detail {

namespace {

const char* const kShapeKeys[] = {"n_layer", "n_head", "d_model", "seq_len", "vocab", "context", "n_kv_head",
                                   "ffn_hidden", "norm_eps", "rope_theta", "tied", "qkv_bias", "rope_scaling"};

// The preset, then the family (a family without a preset starts from that family's first preset).
void resolve_preset(Resolver& r, JobConfig& c) {
  std::vector<std::string> presets;
  for (const auto& p : model_presets()) presets.emplace_back(p.name);
  const auto preset = r.read_one_of("model", "preset", presets);
  if (preset) c.model_preset = presets[*preset];
  ModelFamily family = find_model_preset(c.model_preset)->family;
  r.read(family, "model", "family", {ModelFamily::Gpt2, ModelFamily::Llama});
  if (!preset && family == ModelFamily::Llama) c.model_preset = "llama-small";
  c.model = find_model_preset(c.model_preset).value();
  if (const Setting* s = r.find("model.family"); s && preset && family != c.model.family)
    r.add(s->origin, "model.family",
          "the preset \"" + c.model_preset + "\" is a " + std::string(to_string(c.model.family)) + " model, not " +
              std::string(to_string(family)));
}

// rope_scaling = "none" | "llama3", and the four numbers of "llama3" (Llama 3.1's, unless the preset has its own).
void resolve_rope_scaling(Resolver& r, ModelConfig& m) {
  const auto kind = r.read_one_of("model", "rope_scaling", {"none", "llama3"});
  const bool llama3 = kind ? *kind == 1 : m.rope_scaling.enabled();
  RopeScaling s = m.rope_scaling.enabled() ? m.rope_scaling : RopeScaling{8, 1, 4, 8192};
  r.read(s.factor, "model", "rope_factor", above(0));
  r.read(s.low_freq_factor, "model", "rope_low_freq_factor", above(0));
  r.read(s.high_freq_factor, "model", "rope_high_freq_factor", above(0));
  r.read(s.original_context, "model", "rope_original_context", 1);
  m.rope_scaling = llama3 ? s : RopeScaling{};
  if (llama3) return;
  for (const char* key : {"rope_factor", "rope_low_freq_factor", "rope_high_freq_factor", "rope_original_context"})
    if (const Setting* set = r.find(std::string("model.") + key))
      r.add(set->origin, std::string("model.") + key, "applies with rope_scaling = \"llama3\" only");
}

void resolve_model(Resolver& r, JobConfig& c) {
  resolve_preset(r, c);
  ModelConfig& m = c.model;
  int* const ints[] = {&m.n_layer, &m.n_head, &m.d_model, &m.seq_len, &m.vocab, &m.context, &m.n_kv_head, &m.ffn_hidden};
  for (size_t i = 0; i < std::size(ints); ++i) r.read(*ints[i], "model", kShapeKeys[i], std::nullopt);
  r.read(m.norm_eps, "model", "norm_eps", above(0));
  r.read(m.rope_theta, "model", "rope_theta", above(1));
  r.read(m.tied, "model", "tied");
  r.read(m.qkv_bias, "model", "qkv_bias");
  resolve_rope_scaling(r, m);
  r.read_path(c.model_init_from, "model", "init_from");
  // Explicit from here on, so a resolved config (to_toml, checkpoints) says what it means.
  if (m.context == 0) m.context = m.seq_len;
  if (m.family == ModelFamily::Llama && m.n_kv_head == 0) m.n_kv_head = m.n_head;

  // validate_model_config's sentences start with the field they are about: report them at that key.
  for (const auto& sentence : validate_model_config(c.model)) {
    const std::string field = sentence.substr(0, sentence.find_first_of(" ("));
    const bool is_shape_key = std::find(std::begin(kShapeKeys), std::end(kShapeKeys), field) != std::end(kShapeKeys);
    const std::string key = is_shape_key ? "model." + field : "model";
    const Setting* s = r.find(key);
    r.add(s ? s->origin : r.table_origin("model"), key, sentence);
  }
}

void resolve_job(Resolver& r, const Layers& layers, JobConfig& c) {
  c.source = fs::absolute(layers.top.file).lexically_normal();
  r.read_name(c.job.name, "job", "name", "the run directory's default, the job's etcd keys and role");
  std::optional<fs::path> run_dir;
  r.read_path(run_dir, "job", "run_dir");
  c.job.run_dir = run_dir.value_or((fs::current_path() / "runs" / c.job.name).lexically_normal());
  r.read(c.job.seed, "job", "seed", 0);
  r.read(c.job.insecure, "job", "insecure");
}

// [[data.source]]: each entry read by a resolver of its own, so problems name "data.source[i]".
void resolve_sources(Resolver& r, const Layers& layers, JobConfig& c) {
  const Setting* set = r.lookup("data", "source");
  if (!set) return;
  const auto* array = set->value->as_array();
  if (!array || !array->is_array_of_tables() || array->empty())
    return r.mismatch(*set, "data.source", "an array of tables ([[data.source]] with path and weight)",
                      describe(*set->value));
  for (size_t i = 0; i < array->size(); ++i) {
    const std::string table = "data.source[" + std::to_string(i) + "]";
    Layers view;
    entry_view(layers, *set, *array->get(i), table, view);
    Resolver entry(view);
    entry.require(table, "path", "a string: a file, a directory or a glob of shards");
    std::optional<fs::path> path;
    entry.read_path(path, table, "path");
    SourceSpec source{path.value_or(fs::path()), 1};
    entry.read(source.weight, table, "weight", above(0));
    c.data.sources.push_back(std::move(source));
    entry.report_unknown();
    r.absorb(entry);
  }
}

void resolve_data(Resolver& r, const Layers& layers, JobConfig& c) {
  using Data = JobConfig::Data;
  std::optional<fs::path> data_path;
  r.read_path(data_path, "data", "path");
  resolve_sources(r, layers, c);
  if (data_path && !c.data.sources.empty())
    r.add(r.find("data.path")->origin, "data.path", "expected either data.path or [[data.source]] entries, found both");
  else if (data_path)
    c.data.sources.push_back({*data_path, 1});
  else if (c.data.sources.empty() && !r.find("data.path"))
    r.require("data", "path", "a string: the training data (a file, a directory or a glob), or [[data.source]] entries");
  r.read(c.data.format, "data", "format", {Data::Format::Text, Data::Format::LlmcBin});
  r.read(c.data.val_fraction, "data", "val_fraction", within(0, 1, true, true));
  r.read_path(c.data.val_path, "data", "val_path");
  r.read_path(c.data.tokenizer, "data", "tokenizer");
  r.read(c.data.tokenizer_encoding, "data", "tokenizer_encoding");
}

// Where another setting that refuses one set at `here` was set, for the message:
// "inner.optimizer (line 7)", or with its file when that is another one ("--set ..." too).
std::string setting_at(const Resolver& r, const std::string& key, const Origin& here) {
  const Setting* s = r.find(key);
  if (!s) return key + " (its default)";
  if (s->origin.file == here.file && s->origin.line > 0) return key + " (line " + std::to_string(s->origin.line) + ")";
  return key + " (" + s->origin.file + (s->origin.line > 0 ? ":" + std::to_string(s->origin.line) : "") + ")";
}

// A cooldown belongs to "wsd" alone, and must leave the warmup whole: one setting that cannot act
// is a mistake the user should hear of, not a silent no-op.
void check_cooldown(Resolver& r, const JobConfig& c) {
  if (c.inner.schedule != ScheduleKind::Wsd) {
    for (const char* key : {"decay_fraction", "decay_shape"})
      if (const Setting* s = r.find(std::string("inner.") + key))
        r.add(s->origin, std::string("inner.") + key,
              "only shapes the cooldown of schedule = \"wsd\", and " + setting_at(r, "inner.schedule", s->origin) +
                  " is \"" + std::string(to_string(c.inner.schedule)) + "\"");
    return;
  }
  const std::int64_t cooldown = cooldown_steps(inner_schedule(c.inner));
  if (c.inner.warmup_steps + cooldown < c.inner.steps) return;
  // Reported at the fraction where it was set, else at the schedule that took its default.
  const char* key = r.find("inner.decay_fraction") ? "inner.decay_fraction" : "inner.schedule";
  r.add(r.find(key)->origin, key,
        "a cooldown of " + std::to_string(cooldown) + " steps (decay_fraction " +
            format_number(c.inner.decay_fraction) + ") after a warmup of " + std::to_string(c.inner.warmup_steps) +
            " leaves no step at the peak in " + std::to_string(c.inner.steps) + " steps");
}

void resolve_inner(Resolver& r, JobConfig& c) {
  using Inner = JobConfig::Inner;
  r.read(c.inner.optimizer, "inner", "optimizer", {Inner::Optimizer::AdamW, Inner::Optimizer::Sgd, Inner::Optimizer::Muon});
  r.read(c.inner.muon_momentum, "inner", "muon_momentum", within(0, 1, false, true));
  r.read(c.inner.lr, "inner", "lr", above(0));
  r.read(c.inner.min_lr_ratio, "inner", "min_lr_ratio", within(0, 1, false, false));
  r.read(c.inner.warmup_steps, "inner", "warmup_steps", 0);
  r.read(c.inner.schedule, "inner", "schedule",
         {Inner::Schedule::Cosine, Inner::Schedule::Linear, Inner::Schedule::Constant, Inner::Schedule::Wsd});
  r.read(c.inner.decay_fraction, "inner", "decay_fraction", within(0, 1, true, true));
  r.read(c.inner.decay_shape, "inner", "decay_shape",
         {DecayShape::Linear, DecayShape::OneMinusSqrt, DecayShape::Cosine});
  r.read(c.inner.batch_per_replica, "inner", "batch_per_replica", 1);
  r.read(c.inner.grad_accum, "inner", "grad_accum", 1);
  r.read(c.inner.steps, "inner", "steps", 1);
  r.read(c.inner.clip, "inner", "clip", at_least(0));
  r.read(c.inner.weight_decay, "inner", "weight_decay", at_least(0));
  r.read(c.inner.beta1, "inner", "beta1", within(0, 1, false, true));
  r.read(c.inner.beta2, "inner", "beta2", within(0, 1, false, true));
  r.read(c.inner.eps, "inner", "eps", above(0));
  check_cooldown(r, c);
}

void resolve_guard(Resolver& r, JobConfig& c) {
  r.read(c.guard.enabled, "guard", "enabled");
  r.read(c.guard.window, "guard", "window", 2);
  r.read(c.guard.min_history, "guard", "min_history", 2);
  r.read(c.guard.loss_z, "guard", "loss_z", above(0));
  r.read(c.guard.min_rel_std, "guard", "min_rel_std", at_least(0));
  r.read(c.guard.grad_norm_ratio, "guard", "grad_norm_ratio", above(1));
  r.read(c.guard.snapshot_every, "guard", "snapshot_every", 1);
  r.read(c.guard.lr_factor, "guard", "lr_factor", within(0, 1, true, false));
  r.read(c.guard.max_attempts, "guard", "max_attempts", 0);
  r.read(c.guard.across_sites, "guard", "across_sites");
  r.read(c.guard.loss_scale_floor_factor, "guard", "loss_scale_floor_factor", at_least(1));
  r.read(c.guard.loss_scale_halvings, "guard", "loss_scale_halvings", 1);
  r.read(c.guard.inject_lr_step, "guard", "inject_lr_step", -1);
  r.read(c.guard.inject_lr_steps, "guard", "inject_lr_steps", 1);
  r.read(c.guard.inject_lr_factor, "guard", "inject_lr_factor", above(0));
  // More than the window holds would never be reached. Reported at whichever of the two was set
  // (a window below the default min_history, alone, too; the halvings only when set).
  for (const auto& [key, value] : {std::pair{"min_history", c.guard.min_history},
                                   std::pair{"loss_scale_halvings", c.guard.loss_scale_halvings}}) {
    const Setting* s = r.find(std::string("guard.") + key);
    if (value <= c.guard.window || (s == nullptr && key != std::string_view("min_history"))) continue;
    r.add(s ? s->origin : r.find("guard.window")->origin, std::string("guard.") + key,
          "expected at most guard.window = " + std::to_string(c.guard.window) + ", found " + std::to_string(value));
  }
}

void resolve_ops(Resolver& r, JobConfig& c) {
  r.read(c.ops.metrics, "ops", "metrics");
  r.read(c.ops.metrics_address, "ops", "metrics_address");
  r.read(c.ops.metrics_port, "ops", "metrics_port", 0);
  r.read(c.ops.port, "ops", "port", 0);
  r.read_path(c.ops.token_file, "ops", "token_file");
  if (const Setting* s = r.lookup("ops", "token"))
    r.add(s->origin, "ops.token",
          "a secret does not belong in a job file (shared, and copied into every checkpoint) or on a command line "
          "(`ps` shows it to every user): write it to a file only you can read and name that file in [ops] "
          "token_file, or set MERIDIAN_OPS_TOKEN");
}

void resolve_replicas(Resolver& r, JobConfig& c) {
  using Replicas = JobConfig::Replicas;
  r.read(c.replicas.count, "replicas", "count", 1);
  r.read(c.replicas.restart, "replicas", "restart");
  r.read(c.replicas.max_restarts, "replicas", "max_restarts", 0);
  r.read(c.replicas.heartbeat_timeout_ms, "replicas", "heartbeat_timeout_ms", 1);
  r.read(c.replicas.collective_timeout_ms, "replicas", "collective_timeout_ms", 1);
  r.read(c.replicas.on_failure, "replicas", "on_failure", {Replicas::OnFailure::KeepBatch, Replicas::OnFailure::Scale});
  r.read(c.replicas.sdc_every, "replicas", "sdc_every", 0);
  r.read(c.replicas.overlap_allreduce, "replicas", "overlap_allreduce");
  r.read(c.replicas.store_port, "replicas", "store_port", 0);
}

// What keeps a job's outer state whole: a sharded one is DiLoCo's over the whole model at once, in
// CPU replicas' memory. Nothing when it can be sharded. `here`: where the asking setting is.
std::optional<std::string> whole_outer_because(const Resolver& r, const JobConfig& c, const Origin& here) {
  using Outer = JobConfig::Outer;
  if (c.sites.size() < 2)
    return "a job of one site keeps none (nothing crosses sites): set shard_outer = false or add a site";
  if (c.outer.algorithm == Outer::Algorithm::Sync)
    return setting_at(r, "outer.algorithm", here) + " = \"sync\" keeps none: use \"diloco\" or shard_outer = false";
  if (c.outer.algorithm == Outer::Algorithm::Streaming)
    return setting_at(r, "outer.algorithm", here) +
           " = \"streaming\" keeps it per fragment, which a part does "
           "not cut yet: use \"diloco\" or shard_outer = false";
  if (c.outer.overlap_update == Outer::OverlapUpdate::Eager)
    return setting_at(r, "outer.overlap_update", here) +
           " = \"eager\" steps the whole model ahead: use "
           "\"rebase\" or shard_outer = false";
  // Its parts travel in host memory over the site's group, which is NCCL's on a CUDA site.
  for (std::size_t i = 0; i < c.sites.size(); ++i)
    if (c.sites[i].device == JobConfig::Site::Device::Cuda)
      return "its parts go between a site's CPU replicas for now, and site[" + std::to_string(i) + "] (" +
             quote(c.sites[i].name) + ") has device = \"cuda\": set shard_outer = false for that job";
  return std::nullopt;
}

// After zero_stage: left out, the outer state is sharded where the weights are (stage 3), since a
// whole outer state there needs the whole weights built at start-up and gathered every round.
void resolve_shard_outer(Resolver& r, JobConfig& c) {
  r.read(c.parallel.shard_outer, "parallel", "shard_outer");
  const Setting* s = r.find("parallel.shard_outer");
  if (!s) {
    if (c.parallel.zero_stage != 3 || whole_outer_because(r, c, Origin{})) return;
    c.parallel.shard_outer = true;
    c.derived.push_back(
        "parallel.shard_outer = true (zero_stage = 3 keeps each replica's part of the weights: DiLoCo's outer state "
        "too, so no replica builds or gathers the whole model for it)");
    return;
  }
  if (!c.parallel.shard_outer) return;
  if (const auto why = whole_outer_because(r, c, s->origin))
    r.add(s->origin, "parallel.shard_outer", "shard_outer = true shards DiLoCo's outer state, and " + *why);
}

void resolve_zero_stage(Resolver& r, JobConfig& c) {
  r.read(c.parallel.zero_stage, "parallel", "zero_stage", 0);
  if (const Setting* parts = r.find("checkpoint.per_replica"); parts && c.checkpoint.per_replica && c.parallel.zero_stage == 0)
    r.add(parts->origin, "checkpoint.per_replica",
          "per_replica = true writes each replica's part of a sharded optimizer state, and " +
              setting_at(r, "parallel.zero_stage", parts->origin) + " is 0 (nothing sharded): set zero_stage = 1, 2 or 3, "
              "or per_replica = false");
  const Setting* stage = r.find("parallel.zero_stage");
  if (!stage || c.parallel.zero_stage == 0) return;
  const auto refuse = [&](const std::string& why) { r.add(stage->origin, "parallel.zero_stage", why); };
  if (c.parallel.zero_stage > 3 || c.parallel.zero_stage < 0)
    return refuse("expected 0, 1, 2 or 3, found " + std::to_string(c.parallel.zero_stage));
  const std::string which = "zero_stage = " + std::to_string(c.parallel.zero_stage);
  if (c.inner.optimizer != JobConfig::Inner::Optimizer::AdamW)
    refuse(which + " shards AdamW's moments, and " + setting_at(r, "inner.optimizer", stage->origin) + " is " +
           quote(to_string(c.inner.optimizer)) + ": set inner.optimizer = \"adamw\" or zero_stage = 0");
  if (c.replicas.overlap_allreduce)
    refuse(which + " reduce-scatters the gradients, and " + setting_at(r, "replicas.overlap_allreduce", stage->origin) +
           " all-reduces them during backward: set one of them off");
  if (c.sites.size() > 1 && c.outer.algorithm == JobConfig::Outer::Algorithm::Sync)
    refuse(which + " leaves each replica only its part of the reduced gradients, and " +
           setting_at(r, "outer.algorithm", stage->origin) + " = \"sync\" all-reduces whole gradients across sites: use \"diloco\" "
           "or zero_stage = 0");
  for (std::size_t i = 0; i < c.sites.size(); ++i)
    if (c.sites[i].device == JobConfig::Site::Device::Cuda)
      refuse(which + " runs on CPU replicas for now, and site[" + std::to_string(i) + "] (" + quote(c.sites[i].name) +
             ") has device = \"cuda\": set zero_stage = 0 for that job");
}

// After the sites: a sharded state is refused beside what cannot work with it yet, naming both.
void resolve_parallel(Resolver& r, JobConfig& c) {
  r.read(c.parallel.recompute, "parallel", "recompute", {Recompute::None, Recompute::Cheap, Recompute::Full});
  if (const Setting* s = r.find("parallel.recompute"); s && c.parallel.recompute != Recompute::None)
    for (std::size_t i = 0; i < c.sites.size(); ++i)
      if (c.sites[i].device == JobConfig::Site::Device::Cuda)
        r.add(s->origin, "parallel.recompute",
              "recompute = " + quote(to_string(c.parallel.recompute)) + " runs in the CPU trainer for now, and site[" +
                  std::to_string(i) + "] (" + quote(c.sites[i].name) +
                  ") has device = \"cuda\": set recompute = \"none\" for that job");
  resolve_zero_stage(r, c);
  resolve_shard_outer(r, c);
}

// After [data] and [parallel]: a sample is decoded into text from whole weights.
void resolve_samples(Resolver& r, JobConfig& c) {
  r.read(c.log.sample_every, "log", "sample_every", 0);
  r.read(c.log.sample_tokens, "log", "sample_tokens", 1);
  r.read(c.log.sample_prompt, "log", "sample_prompt");
  const Setting* every = r.find("log.sample_every");
  if (!every || c.log.sample_every == 0) return;
  const auto refuse = [&](const std::string& why) { r.add(every->origin, "log.sample_every", why); };
  if (!c.data.tokenizer && c.model.vocab != 256)
    refuse("a sample is text, and the data names no [data] tokenizer for a vocabulary of " +
           std::to_string(c.model.vocab) + ": name it, or set sample_every = 0");
  if (c.parallel.zero_stage == 3)
    refuse(
        "zero_stage = 3 keeps no replica's weights whole to sample from: set zero_stage to 2 or less, or "
        "sample_every = 0");
}

}  // namespace

JobConfig resolve(const Layers& layers, std::vector<ConfigProblem>& problems) {
  Resolver r(layers);
  JobConfig c;
  resolve_job(r, layers, c);
  resolve_model(r, c);
  resolve_data(r, layers, c);
  resolve_inner(r, c);
  r.read(c.log.every, "log", "every", 1);
  r.read(c.log.eval_every, "log", "eval_every", 0);
  r.read(c.log.eval_windows, "log", "eval_windows", 1);
  r.read(c.checkpoint.every, "checkpoint", "every", 0);
  r.read(c.checkpoint.keep, "checkpoint", "keep", 1);
  r.read(c.checkpoint.per_replica, "checkpoint", "per_replica");
  resolve_guard(r, c);
  resolve_ops(r, c);
  resolve_replicas(r, c);
  r.read(c.launch.max_site_restarts, "launch", "max_site_restarts", 0);
  r.read(c.launch.restart_backoff_ms, "launch", "restart_backoff_ms", 0);
  resolve_multisite(r, layers, c);  // after [replicas]: the implicit site takes its replica count
  resolve_parallel(r, c);           // after the sites and [outer]: it checks them
  resolve_samples(r, c);
  resolve_sim(r, layers, c);
  r.report_unknown();
  r.flush(problems);
  return c;
}

}  // namespace meridian::config_detail
