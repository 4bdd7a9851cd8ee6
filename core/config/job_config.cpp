#include "core/config/job_config.hpp"

#include <algorithm>
#include <sstream>

#include "core/config/layers.hpp"
#include "core/util/error.hpp"

namespace meridian {

std::string_view to_string(JobConfig::Data::Format f) {
  switch (f) {
    case JobConfig::Data::Format::Text: return "text";
    case JobConfig::Data::Format::LlmcBin: return "llmc-bin";
  }
  return "?";
}

std::string_view to_string(JobConfig::Inner::Optimizer o) {
  switch (o) {
    case JobConfig::Inner::Optimizer::AdamW: return "adamw";
    case JobConfig::Inner::Optimizer::Sgd: return "sgd";
    case JobConfig::Inner::Optimizer::Muon: return "muon";
  }
  return "?";
}

std::string_view to_string(JobConfig::Inner::Schedule s) {
  switch (s) {
    case JobConfig::Inner::Schedule::Cosine: return "cosine";
    case JobConfig::Inner::Schedule::Linear: return "linear";
    case JobConfig::Inner::Schedule::Constant: return "constant";
    case JobConfig::Inner::Schedule::Wsd:
      return "wsd";
  }
  return "?";
}

std::string_view to_string(DecayShape s) {
  switch (s) {
    case DecayShape::Linear:
      return "linear";
    case DecayShape::OneMinusSqrt:
      return "1-sqrt";
    case DecayShape::Cosine:
      return "cosine";
  }
  return "?";
}

std::string_view to_string(JobConfig::Replicas::OnFailure f) {
  switch (f) {
    case JobConfig::Replicas::OnFailure::KeepBatch: return "keep_batch";
    case JobConfig::Replicas::OnFailure::Scale: return "scale";
  }
  return "?";
}

std::string_view to_string(JobConfig::Outer::Algorithm a) {
  switch (a) {
    case JobConfig::Outer::Algorithm::Sync: return "sync";
    case JobConfig::Outer::Algorithm::Diloco: return "diloco";
    case JobConfig::Outer::Algorithm::Streaming: return "streaming";
  }
  return "?";
}

std::string_view to_string(JobConfig::Outer::Codec c) {
  switch (c) {
    case JobConfig::Outer::Codec::Fp32: return "fp32";
    case JobConfig::Outer::Codec::Bf16: return "bf16";
    case JobConfig::Outer::Codec::Int8: return "int8";
    case JobConfig::Outer::Codec::Int4: return "int4";
    case JobConfig::Outer::Codec::Sparse: return "sparse";
  }
  return "?";
}

std::string_view to_string(JobConfig::Outer::OverlapUpdate u) {
  switch (u) {
    case JobConfig::Outer::OverlapUpdate::Rebase: return "rebase";
    case JobConfig::Outer::OverlapUpdate::Eager: return "eager";
  }
  return "?";
}

std::string_view to_string(JobConfig::Outer::PartialCommit p) {
  switch (p) {
    case JobConfig::Outer::PartialCommit::Scaled: return "scaled";
    case JobConfig::Outer::PartialCommit::Averaged: return "averaged";
  }
  return "?";
}

std::string_view to_string(JobConfig::Outer::Staleness s) {
  switch (s) {
    case JobConfig::Outer::Staleness::Inverse: return "inverse";
    case JobConfig::Outer::Staleness::Constant: return "constant";
  }
  return "?";
}

std::string_view to_string(JobConfig::Transport::Kind k) {
  switch (k) {
    case JobConfig::Transport::Kind::Zmq: return "zmq";
    case JobConfig::Transport::Kind::Ucx: return "ucx";
  }
  return "?";
}

std::string_view to_string(JobConfig::Transport::Exchange e) {
  switch (e) {
    case JobConfig::Transport::Exchange::Leader: return "leader";
    case JobConfig::Transport::Exchange::Split: return "split";
  }
  return "?";
}

std::string_view to_string(JobConfig::Transport::Network n) {
  switch (n) {
    case JobConfig::Transport::Network::Public: return "public";
    case JobConfig::Transport::Network::Private: return "private";
  }
  return "?";
}

std::string_view to_string(JobConfig::Site::Device d) {
  switch (d) {
    case JobConfig::Site::Device::Cpu: return "cpu";
    case JobConfig::Site::Device::Cuda: return "cuda";
  }
  return "?";
}

std::string_view to_string(JobConfig::Site::Attention a) {
  switch (a) {
    case JobConfig::Site::Attention::Materialized: return "materialized";
    case JobConfig::Site::Attention::Tiled: return "tiled";
    case JobConfig::Site::Attention::Cudnn:
      return "cudnn";
  }
  return "?";
}

std::string_view to_string(JobConfig::Site::Precision p) {
  switch (p) {
    case JobConfig::Site::Precision::Fp32: return "fp32";
    case JobConfig::Site::Precision::Bf16: return "bf16";
    case JobConfig::Site::Precision::Fp16: return "fp16";
  }
  return "?";
}

std::string_view to_string(WanLink::Jitter j) {
  switch (j) {
    case WanLink::Jitter::Normal: return "normal";
    case WanLink::Jitter::Uniform: return "uniform";
    case WanLink::Jitter::Pareto: return "pareto";
  }
  return "?";
}

std::string_view to_string(JobConfig::Wan::Fault::Kind k) {
  switch (k) {
    case JobConfig::Wan::Fault::Kind::Partition: return "partition";
    case JobConfig::Wan::Fault::Kind::Bandwidth: return "bandwidth";
    case JobConfig::Wan::Fault::Kind::Latency: return "latency";
  }
  return "?";
}

std::string ConfigProblem::to_string() const {
  std::string out = file;
  if (line > 0) out.append(":").append(std::to_string(line));
  if (!out.empty()) out.append(": ");
  if (!key.empty()) out.append(key).append(": ");
  return out.append(message);
}

std::variant<JobConfig, std::vector<ConfigProblem>> try_load_job_config(const std::filesystem::path& file,
                                                                        const std::vector<std::string>& overrides) {
  config_detail::Layers layers;
  std::vector<ConfigProblem> problems;
  config_detail::load_layers(file, layers, problems);
  // An unreadable or unparsable file leaves nothing trustworthy to check the schema against.
  if (!problems.empty()) return problems;
  std::vector<ConfigProblem> malformed_overrides;
  config_detail::apply_overrides(overrides, layers, malformed_overrides);
  JobConfig config = config_detail::resolve(layers, problems);
  problems.insert(problems.end(), malformed_overrides.begin(), malformed_overrides.end());  // --set comes last
  if (!problems.empty()) return problems;
  return config;
}

JobConfig load_job_config(const std::filesystem::path& file, const std::vector<std::string>& overrides) {
  auto result = try_load_job_config(file, overrides);
  if (auto* config = std::get_if<JobConfig>(&result)) return std::move(*config);
  std::string lines;
  for (const auto& p : std::get<std::vector<ConfigProblem>>(result)) {
    if (!lines.empty()) lines.push_back('\n');
    lines.append(p.to_string());
  }
  throw make_error(ErrorKind::Config, lines);
}

namespace {

// Shortest text that reads back as the same double, always with a '.' or exponent so TOML reads a float.
std::string floating(double v) {
  std::string text = config_detail::format_number(v);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

const char* boolean(bool b) { return b ? "true" : "false"; }

void link_toml(std::ostream& out, const WanLink& l) {
  out << "latency_ms = " << floating(l.latency_ms) << "\n"
      << "jitter_ms = " << floating(l.jitter_ms) << "\n"
      << "jitter = " << config_detail::quote(to_string(l.jitter)) << "\n"
      << "bandwidth_mbps = " << floating(l.bandwidth_mbps) << "\n"
      << "stream_mbps = " << floating(l.stream_mbps) << "\n"
      << "loss = " << floating(l.loss) << "\n";
}

std::string sites_toml(const std::vector<std::string>& sites) {
  std::string out = "[";
  for (size_t i = 0; i < sites.size(); ++i) out += (i ? ", " : "") + config_detail::quote(sites[i]);
  return out + "]";
}

// Every link written out whole, so the profile only names where the values came from.
void wan_toml(std::ostream& out, const JobConfig::Wan& wan) {
  using Kind = JobConfig::Wan::Fault::Kind;
  out << "\n[wan]\n";
  if (!wan.profile.empty()) out << "profile = " << config_detail::quote(wan.profile) << "\n";
  link_toml(out, wan.link);
  for (const auto& pair : wan.links) {
    out << "\n[[wan.link]]\nsites = " << sites_toml({pair.a, pair.b}) << "\n";
    link_toml(out, pair.link);
  }
  for (const auto& f : wan.faults) {
    out << "\n[[wan.fault]]\n"
        << "kind = " << config_detail::quote(to_string(f.kind)) << "\n"
        << "sites = " << sites_toml(f.sites) << "\n"
        << "from_s = " << floating(f.from_s) << "\n"
        << "to_s = " << floating(f.to_s) << "\n";
    if (f.kind != Kind::Partition) out << "pair = " << boolean(f.pair) << "\n";
    if (f.kind == Kind::Bandwidth) out << "bandwidth_mbps = " << floating(f.bandwidth_mbps) << "\n";
    if (f.kind == Kind::Latency) out << "latency_ms = " << floating(f.latency_ms) << "\n";
  }
}

void multisite_toml(std::ostream& out, const JobConfig& c) {
  using config_detail::quote;
  out << "\n[outer]\n"
      << "algorithm = " << quote(to_string(c.outer.algorithm)) << "\n"
      << "inner_steps = " << c.outer.inner_steps << "\n"
      << "early_inner_steps = " << c.outer.early_inner_steps << "\n"
      << "early_steps = " << c.outer.early_steps << "\n"
      << "lr = " << floating(c.outer.lr) << "\n"
      << "momentum = " << floating(c.outer.momentum) << "\n"
      << "momentum_warmup = " << c.outer.momentum_warmup << "\n"
      << "nesterov = " << boolean(c.outer.nesterov) << "\n"
      << "codec = " << quote(to_string(c.outer.codec)) << "\n"
      << "block = " << c.outer.block << "\n"
      << "density = " << floating(c.outer.density) << "\n"
      << "error_feedback = " << boolean(c.outer.error_feedback) << "\n"
      << "max_staleness = " << c.outer.max_staleness << "\n"
      << "quorum = " << c.outer.quorum << "\n"
      << "deadline_ms = " << c.outer.deadline_ms << "\n"
      << "overlap = " << boolean(c.outer.overlap) << "\n"
      << "overlap_steps = " << c.outer.overlap_steps << "\n"
      << "overlap_update = " << quote(to_string(c.outer.overlap_update)) << "\n"
      << "staleness = " << quote(to_string(c.outer.staleness)) << "\n"
      << "partial_commit = " << quote(to_string(c.outer.partial_commit)) << "\n"
      << "delayed_nesterov = " << c.outer.delayed_nesterov << "\n"
      << "deadline_k = " << floating(c.outer.deadline_k) << "\n"
      << "max_norm_ratio = " << floating(c.outer.max_norm_ratio) << "\n"
      << "dynamic_inner_steps = " << boolean(c.outer.dynamic_inner_steps) << "\n"
      << "fragments = " << c.outer.fragments << "\n"
      << "\n[transport]\n"
      << "kind = " << quote(to_string(c.transport.kind)) << "\n"
      << "network = " << quote(to_string(c.transport.network)) << "\n"
      << "exchange = " << quote(to_string(c.transport.exchange)) << "\n"
      << "chunk_bytes = " << c.transport.chunk_bytes << "\n";
  if (c.transport.link_key_file) out << "link_key_file = " << quote(c.transport.link_key_file->string()) << "\n";
  if (c.transport.link_public_key_file)
    out << "link_public_key_file = " << quote(c.transport.link_public_key_file->string()) << "\n";
  out << "\n[control]\n"
      << "endpoints = [";
  for (size_t i = 0; i < c.control.endpoints.size(); ++i) out << (i ? ", " : "") << quote(c.control.endpoints[i]);
  out << "]\n"
      << "lease_ttl_s = " << c.control.lease_ttl_s << "\n"
      << "keepalive_ms = " << c.control.keepalive_ms << "\n"
      << "end_unreachable_s = " << c.control.end_unreachable_s << "\n";
  for (const auto& [key, file] : {std::pair{"ca_file", &c.control.ca_file}, std::pair{"cert_file", &c.control.cert_file},
                                  std::pair{"key_file", &c.control.key_file}, std::pair{"password_file", &c.control.password_file}})
    if (*file) out << key << " = " << quote((*file)->string()) << "\n";
  for (const auto& site : c.sites) {
    out << "\n[[site]]\n"
        << "name = " << quote(site.name) << "\n"
        << "host = " << quote(site.host) << "\n"
        << "port = " << site.port << "\n"
        << "replicas = " << site.replicas << "\n"
        << "device = " << quote(to_string(site.device)) << "\n"
        << "precision = " << quote(to_string(site.precision)) << "\n"
        << "attention = " << quote(to_string(site.attention)) << "\n"
        << "speed = " << floating(site.speed) << "\n";
    if (!site.link_public_key.empty()) out << "link_public_key = " << quote(site.link_public_key) << "\n";
  }
  wan_toml(out, c.wan);
}

}  // namespace

std::filesystem::path site_run_dir(const JobConfig& config, std::string_view site) {
  const bool known = std::any_of(config.sites.begin(), config.sites.end(), [&](const auto& s) { return s.name == site; });
  if (!known) throw make_error(ErrorKind::Config, "site '", site, "' is not a [[site]] of job '", config.job.name, "'");
  if (config.sites.size() == 1) return config.job.run_dir;
  return config.job.run_dir / std::string(site);
}

JobConfig config_for_site(JobConfig config, std::string_view site) {
  config.job.run_dir = site_run_dir(config, site);
  for (const auto& s : config.sites)
    if (s.name == site) config.replicas.count = s.replicas;
  return config;
}

WanLink wan_link(const JobConfig& config, std::string_view a, std::string_view b) {
  for (const auto& pair : config.wan.links)
    if ((pair.a == a && pair.b == b) || (pair.a == b && pair.b == a)) return pair.link;
  return config.wan.link;
}

std::string model_toml(const ModelConfig& m, const std::string& preset,
                       const std::optional<std::filesystem::path>& init_from) {
  std::ostringstream out;
  out << "[model]\n";
  if (!preset.empty()) out << "preset = " << config_detail::quote(preset) << "\n";
  out << "family = " << config_detail::quote(std::string(to_string(m.family))) << "\n"
      << "n_layer = " << m.n_layer << "\n"
      << "n_head = " << m.n_head << "\n"
      << "d_model = " << m.d_model << "\n"
      << "seq_len = " << m.seq_len << "\n"
      << "context = " << m.positions() << "\n"
      << "vocab = " << m.vocab << "\n";
  if (init_from) out << "init_from = " << config_detail::quote(init_from->string()) << "\n";
  if (m.family != ModelFamily::Llama) return out.str();
  out << "n_kv_head = " << m.kv_heads() << "\n"
      << "ffn_hidden = " << m.ffn_hidden << "\n"
      << "norm_eps = " << floating(m.norm_eps) << "\n"
      << "rope_theta = " << floating(m.rope_theta) << "\n"
      << "tied = " << boolean(m.tied) << "\n"
      << "qkv_bias = " << boolean(m.qkv_bias) << "\n"
      << "rope_scaling = \"" << (m.rope_scaling.enabled() ? "llama3" : "none") << "\"\n";
  if (!m.rope_scaling.enabled()) return out.str();
  out << "rope_factor = " << floating(m.rope_scaling.factor) << "\n"
      << "rope_low_freq_factor = " << floating(m.rope_scaling.low_freq_factor) << "\n"
      << "rope_high_freq_factor = " << floating(m.rope_scaling.high_freq_factor) << "\n"
      << "rope_original_context = " << m.rope_scaling.original_context << "\n";
  return out.str();
}

std::string to_toml(const JobConfig& c) {
  std::ostringstream out;
  out << "# Resolved from " << c.source.string() << "\n"
      << "\n[job]\n"
      << "name = " << config_detail::quote(c.job.name) << "\n"
      << "run_dir = " << config_detail::quote(c.job.run_dir.string()) << "\n"
      << "seed = " << c.job.seed << "\n"
      << "insecure = " << (c.job.insecure ? "true" : "false") << "\n"
      << "\n" << model_toml(c.model, c.model_preset, c.model_init_from)
      << "\n[data]\n"
      << "format = " << config_detail::quote(to_string(c.data.format)) << "\n"
      << "val_fraction = " << floating(c.data.val_fraction) << "\n";
  if (c.data.val_path) out << "val_path = " << config_detail::quote(c.data.val_path->string()) << "\n";
  if (c.data.tokenizer) out << "tokenizer = " << config_detail::quote(c.data.tokenizer->string()) << "\n";
  if (!c.data.tokenizer_encoding.empty())
    out << "tokenizer_encoding = " << config_detail::quote(c.data.tokenizer_encoding) << "\n";
  for (const auto& source : c.data.sources)
    out << "\n[[data.source]]\n"
        << "path = " << config_detail::quote(source.path.string()) << "\n"
        << "weight = " << floating(source.weight) << "\n";
  out << "\n[inner]\n"
      << "optimizer = " << config_detail::quote(to_string(c.inner.optimizer)) << "\n"
      << "lr = " << floating(c.inner.lr) << "\n"
      << "min_lr_ratio = " << floating(c.inner.min_lr_ratio) << "\n"
      << "warmup_steps = " << c.inner.warmup_steps << "\n"
      << "schedule = " << config_detail::quote(to_string(c.inner.schedule)) << "\n"
      << (c.inner.schedule != ScheduleKind::Wsd
              ? ""
              : "decay_fraction = " + floating(c.inner.decay_fraction) + "\n" +
                    "decay_shape = " + config_detail::quote(std::string(to_string(c.inner.decay_shape))) + "\n")
      << "batch_per_replica = " << c.inner.batch_per_replica << "\n"
      << "grad_accum = " << c.inner.grad_accum << "\n"
      << "steps = " << c.inner.steps << "\n"
      << "clip = " << floating(c.inner.clip) << "\n"
      << "weight_decay = " << floating(c.inner.weight_decay) << "\n"
      << "beta1 = " << floating(c.inner.beta1) << "\n"
      << "beta2 = " << floating(c.inner.beta2) << "\n"
      << "eps = " << floating(c.inner.eps) << "\n"
      << "muon_momentum = " << floating(c.inner.muon_momentum) << "\n"
      << "\n[log]\n"
      << "every = " << c.log.every << "\n"
      << "eval_every = " << c.log.eval_every << "\n"
      << "eval_windows = " << c.log.eval_windows << "\n"
      << "sample_every = " << c.log.sample_every << "\n"
      << "sample_tokens = " << c.log.sample_tokens << "\n"
      << (c.log.sample_prompt.empty() ? "" : "sample_prompt = " + config_detail::quote(c.log.sample_prompt) + "\n")
      << "\n[checkpoint]\n"
      << "every = " << c.checkpoint.every << "\n"
      << "keep = " << c.checkpoint.keep << "\n"
      << "per_replica = " << (c.checkpoint.per_replica ? "true" : "false") << "\n"
      << "\n[guard]\n"
      << "enabled = " << boolean(c.guard.enabled) << "\n"
      << "window = " << c.guard.window << "\n"
      << "min_history = " << c.guard.min_history << "\n"
      << "loss_z = " << floating(c.guard.loss_z) << "\n"
      << "min_rel_std = " << floating(c.guard.min_rel_std) << "\n"
      << "grad_norm_ratio = " << floating(c.guard.grad_norm_ratio) << "\n"
      << "snapshot_every = " << c.guard.snapshot_every << "\n"
      << "lr_factor = " << floating(c.guard.lr_factor) << "\n"
      << "max_attempts = " << c.guard.max_attempts << "\n"
      << "across_sites = " << boolean(c.guard.across_sites) << "\n"
      << "loss_scale_floor_factor = " << floating(c.guard.loss_scale_floor_factor) << "\n"
      << "loss_scale_halvings = " << c.guard.loss_scale_halvings << "\n"
      << "inject_lr_step = " << c.guard.inject_lr_step << "\n"
      << "inject_lr_steps = " << c.guard.inject_lr_steps << "\n"
      << "inject_lr_factor = " << floating(c.guard.inject_lr_factor) << "\n"
      << "\n[ops]\n"
      << "metrics = " << boolean(c.ops.metrics) << "\n"
      << "metrics_address = " << config_detail::quote(c.ops.metrics_address) << "\n"
      << "metrics_port = " << c.ops.metrics_port << "\n"
      << "port = " << c.ops.port << "\n";
  if (c.ops.token_file) out << "token_file = " << config_detail::quote(c.ops.token_file->string()) << "\n";
  out << "\n[replicas]\n"
      << "count = " << c.replicas.count << "\n"
      << "restart = " << (c.replicas.restart ? "true" : "false") << "\n"
      << "max_restarts = " << c.replicas.max_restarts << "\n"
      << "heartbeat_timeout_ms = " << c.replicas.heartbeat_timeout_ms << "\n"
      << "collective_timeout_ms = " << c.replicas.collective_timeout_ms << "\n"
      << "on_failure = \"" << to_string(c.replicas.on_failure) << "\"\n"
      << "sdc_every = " << c.replicas.sdc_every << "\n"
      << "overlap_allreduce = " << (c.replicas.overlap_allreduce ? "true" : "false") << "\n"
      << "store_port = " << c.replicas.store_port << "\n"
      << "\n[parallel]\n"
      << "zero_stage = " << c.parallel.zero_stage << "\n"
      << "recompute = \"" << to_string(c.parallel.recompute) << "\"\n"
      << "shard_outer = " << (c.parallel.shard_outer ? "true" : "false") << "\n"
      << "\n[launch]\n"
      << "max_site_restarts = " << c.launch.max_site_restarts << "\n"
      << "restart_backoff_ms = " << c.launch.restart_backoff_ms << "\n";
  multisite_toml(out, c);
  config_detail::sim_toml(out, c.sim);
  return out.str();
}

}  // namespace meridian
