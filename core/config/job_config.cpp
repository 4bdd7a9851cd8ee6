#include "core/config/job_config.hpp"

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
  }
  return "?";
}

std::string_view to_string(JobConfig::Inner::Schedule s) {
  switch (s) {
    case JobConfig::Inner::Schedule::Cosine: return "cosine";
    case JobConfig::Inner::Schedule::Linear: return "linear";
    case JobConfig::Inner::Schedule::Constant: return "constant";
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

}  // namespace

std::string to_toml(const JobConfig& c) {
  std::ostringstream out;
  out << "# Resolved from " << c.source.string() << "\n"
      << "\n[job]\n"
      << "name = " << config_detail::quote(c.job.name) << "\n"
      << "run_dir = " << config_detail::quote(c.job.run_dir.string()) << "\n"
      << "seed = " << c.job.seed << "\n"
      << "\n[model]\n"
      << "preset = " << config_detail::quote(c.model_preset) << "\n"
      << "n_layer = " << c.model.n_layer << "\n"
      << "n_head = " << c.model.n_head << "\n"
      << "d_model = " << c.model.d_model << "\n"
      << "seq_len = " << c.model.seq_len << "\n"
      << "vocab = " << c.model.vocab << "\n"
      << "\n[data]\n"
      << "path = " << config_detail::quote(c.data.path.string()) << "\n"
      << "format = " << config_detail::quote(to_string(c.data.format)) << "\n"
      << "val_fraction = " << floating(c.data.val_fraction) << "\n";
  if (c.data.val_path) out << "val_path = " << config_detail::quote(c.data.val_path->string()) << "\n";
  out << "\n[inner]\n"
      << "optimizer = " << config_detail::quote(to_string(c.inner.optimizer)) << "\n"
      << "lr = " << floating(c.inner.lr) << "\n"
      << "min_lr_ratio = " << floating(c.inner.min_lr_ratio) << "\n"
      << "warmup_steps = " << c.inner.warmup_steps << "\n"
      << "schedule = " << config_detail::quote(to_string(c.inner.schedule)) << "\n"
      << "batch_per_replica = " << c.inner.batch_per_replica << "\n"
      << "grad_accum = " << c.inner.grad_accum << "\n"
      << "steps = " << c.inner.steps << "\n"
      << "clip = " << floating(c.inner.clip) << "\n"
      << "weight_decay = " << floating(c.inner.weight_decay) << "\n"
      << "beta1 = " << floating(c.inner.beta1) << "\n"
      << "beta2 = " << floating(c.inner.beta2) << "\n"
      << "eps = " << floating(c.inner.eps) << "\n"
      << "\n[log]\n"
      << "every = " << c.log.every << "\n"
      << "eval_every = " << c.log.eval_every << "\n"
      << "eval_windows = " << c.log.eval_windows << "\n"
      << "\n[checkpoint]\n"
      << "every = " << c.checkpoint.every << "\n"
      << "keep = " << c.checkpoint.keep << "\n"
      << "\n[replicas]\n"
      << "count = " << c.replicas.count << "\n"
      << "restart = " << (c.replicas.restart ? "true" : "false") << "\n"
      << "max_restarts = " << c.replicas.max_restarts << "\n"
      << "heartbeat_timeout_ms = " << c.replicas.heartbeat_timeout_ms << "\n"
      << "collective_timeout_ms = " << c.replicas.collective_timeout_ms << "\n"
      << "on_failure = \"" << to_string(c.replicas.on_failure) << "\"\n"
      << "sdc_every = " << c.replicas.sdc_every << "\n"
      << "overlap_allreduce = " << (c.replicas.overlap_allreduce ? "true" : "false") << "\n"
      << "store_port = " << c.replicas.store_port << "\n";
  return out.str();
}

}  // namespace meridian
