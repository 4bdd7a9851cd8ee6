// The schema of [sim] (the at-scale simulator's assumptions) and its TOML form.
#include <ostream>

#include "core/config/resolver.hpp"

namespace meridian {

std::string_view to_string(SimConfig::Algorithm a) {
  switch (a) {
    case SimConfig::Algorithm::Sync: return "sync";
    case SimConfig::Algorithm::Diloco: return "diloco";
    case SimConfig::Algorithm::Overlap: return "overlap";
    case SimConfig::Algorithm::Streaming: return "streaming";
    case SimConfig::Algorithm::Async: return "async";
  }
  return "?";
}

std::string_view to_string(SimConfig::Exchange e) {
  switch (e) {
    case SimConfig::Exchange::Leader: return "leader";
    case SimConfig::Exchange::Split: return "split";
  }
  return "?";
}

std::string_view to_string(SimConfig::Failure::Scope s) {
  switch (s) {
    case SimConfig::Failure::Scope::Replica: return "replica";
    case SimConfig::Failure::Scope::Site: return "site";
  }
  return "?";
}

}  // namespace meridian

namespace meridian::config_detail {

namespace {

using Algorithm = SimConfig::Algorithm;
constexpr Algorithm kAlgorithms[] = {Algorithm::Sync, Algorithm::Diloco, Algorithm::Overlap, Algorithm::Streaming,
                                     Algorithm::Async};

void read_algorithms(Resolver& r, SimConfig& s) {
  const Setting* set = r.lookup("sim", "algorithms");
  if (!set) return;
  std::string expected = "an array of";
  for (size_t i = 0; i < std::size(kAlgorithms); ++i) expected += (i ? ", " : " ") + quote(to_string(kAlgorithms[i]));
  const auto* array = set->value->as_array();
  if (!array || array->empty()) return r.mismatch(*set, "sim.algorithms", expected, describe(*set->value));
  for (const auto& element : *array) {
    const auto* name = element.as_string();
    const auto* found = name ? std::find_if(std::begin(kAlgorithms), std::end(kAlgorithms),
                                            [&](Algorithm a) { return to_string(a) == name->get(); })
                             : std::end(kAlgorithms);
    if (found == std::end(kAlgorithms)) return r.mismatch(*set, "sim.algorithms", expected, describe(element));
    if (std::find(s.algorithms.begin(), s.algorithms.end(), *found) == s.algorithms.end())
      s.algorithms.push_back(*found);
  }
}

SimConfig::Failure read_failure(Resolver& r, const std::string& table, const Origin& at) {
  using Scope = SimConfig::Failure::Scope;
  SimConfig::Failure f;
  r.require(table, "name", "a string: the failure class");
  r.read(f.name, table, "name");
  r.read(f.scope, table, "scope", {Scope::Replica, Scope::Site});
  r.read(f.per_gpu_hour, table, "per_gpu_hour", at_least(0));
  r.read(f.per_node_day, table, "per_node_day", at_least(0));
  r.read(f.recovery_s, table, "recovery_s", at_least(0));
  if ((f.per_gpu_hour > 0) == (f.per_node_day > 0))
    r.add(at, table, "expected a rate: exactly one of per_gpu_hour and per_node_day > 0, found " +
                         (f.per_gpu_hour > 0 ? std::string("both") : std::string("neither")));
  return f;
}

// [[sim.failure]]: each entry read by a resolver of its own, so problems name "sim.failure[i]".
void resolve_failures(Resolver& r, const Layers& layers, SimConfig& s) {
  const Setting* set = r.lookup("sim", "failure");
  if (!set) return;
  const auto* array = set->value->as_array();
  if (!array || !array->is_array_of_tables())
    return r.mismatch(*set, "sim.failure", "an array of tables ([[sim.failure]])", describe(*set->value));
  for (size_t i = 0; i < array->size(); ++i) {
    const std::string table = "sim.failure[" + std::to_string(i) + "]";
    Layers view;
    entry_view(layers, *set, *array->get(i), table, view);
    Resolver entry(view);
    s.failures.push_back(read_failure(entry, table, view.tables.at(table)));
    entry.report_unknown();
    r.absorb(entry);
  }
}

// sim.step_times_s: one positive number per [[site]].
void read_step_times(Resolver& r, const JobConfig& c, SimConfig& s) {
  const Setting* set = r.lookup("sim", "step_times_s");
  if (!set) return;
  const std::string expected = "an array of " + std::to_string(c.sites.size()) + " numbers > 0 (one per [[site]])";
  const auto* array = set->value->as_array();
  if (!array || array->size() != c.sites.size())
    return r.mismatch(*set, "sim.step_times_s", expected, describe(*set->value));
  for (const auto& element : *array) {
    const auto v = element.value<double>();
    if (!v || !(*v > 0)) return r.mismatch(*set, "sim.step_times_s", expected, describe(element));
    s.step_times_s.push_back(*v);
  }
}

}  // namespace

void resolve_sim(Resolver& r, const Layers& layers, JobConfig& c) {
  SimConfig& s = c.sim;
  r.read(s.gpus_per_site, "sim", "gpus_per_site", 0);
  r.read(s.gpus_per_node, "sim", "gpus_per_node", 1);
  r.read(s.params, "sim", "params", at_least(0));
  r.read(s.tokens_per_gpu_step, "sim", "tokens_per_gpu_step", at_least(0));
  r.read(s.step_time_s, "sim", "step_time_s", at_least(0));
  read_step_times(r, c, s);
  r.read(s.step_overhead_s, "sim", "step_overhead_s", at_least(0));
  r.read(s.step_time_cv, "sim", "step_time_cv", at_least(0));
  r.read(s.peak_tflops, "sim", "peak_tflops", above(0));
  r.read(s.mfu, "sim", "mfu", within(0, 1, true, false));
  r.read(s.intra_bandwidth_gbps, "sim", "intra_bandwidth_gbps", above(0));
  r.read(s.intra_latency_us, "sim", "intra_latency_us", at_least(0));
  r.read(s.grad_bytes_per_param, "sim", "grad_bytes_per_param", above(0));
  r.read(s.startup_s, "sim", "startup_s", at_least(0));
  r.read(s.regroup_s, "sim", "regroup_s", at_least(0));
  r.read(s.token_budget, "sim", "token_budget", at_least(0));
  r.read(s.days, "sim", "days", at_least(0));
  read_algorithms(r, s);
  r.read(s.exchange, "sim", "exchange", {SimConfig::Exchange::Leader, SimConfig::Exchange::Split});
  r.read(s.seed, "sim", "seed", 0);
  resolve_failures(r, layers, s);
}

namespace {

std::string number(double v) {
  std::string text = format_number(v);
  if (text.find_first_of(".e") == std::string::npos && text.find("inf") == std::string::npos) text += ".0";
  return text;
}

}  // namespace

void sim_toml(std::ostream& out, const SimConfig& s) {
  out << "\n[sim]\n"
      << "gpus_per_site = " << s.gpus_per_site << "\n"
      << "gpus_per_node = " << s.gpus_per_node << "\n"
      << "params = " << number(s.params) << "\n"
      << "tokens_per_gpu_step = " << number(s.tokens_per_gpu_step) << "\n"
      << "step_time_s = " << number(s.step_time_s) << "\n"
      << "step_overhead_s = " << number(s.step_overhead_s) << "\n"
      << "step_time_cv = " << number(s.step_time_cv) << "\n"
      << "peak_tflops = " << number(s.peak_tflops) << "\n"
      << "mfu = " << number(s.mfu) << "\n"
      << "intra_bandwidth_gbps = " << number(s.intra_bandwidth_gbps) << "\n"
      << "intra_latency_us = " << number(s.intra_latency_us) << "\n"
      << "grad_bytes_per_param = " << number(s.grad_bytes_per_param) << "\n"
      << "startup_s = " << number(s.startup_s) << "\n"
      << "regroup_s = " << number(s.regroup_s) << "\n"
      << "token_budget = " << number(s.token_budget) << "\n"
      << "days = " << number(s.days) << "\n"
      << "exchange = " << quote(to_string(s.exchange)) << "\n"
      << "seed = " << s.seed << "\n";
  if (!s.step_times_s.empty()) {
    out << "step_times_s = [";
    for (size_t i = 0; i < s.step_times_s.size(); ++i) out << (i ? ", " : "") << number(s.step_times_s[i]);
    out << "]\n";
  }
  if (!s.algorithms.empty()) {
    out << "algorithms = [";
    for (size_t i = 0; i < s.algorithms.size(); ++i) out << (i ? ", " : "") << quote(to_string(s.algorithms[i]));
    out << "]\n";
  }
  for (const auto& f : s.failures)
    out << "\n[[sim.failure]]\n"
        << "name = " << quote(f.name) << "\n"
        << "scope = " << quote(to_string(f.scope)) << "\n"
        << "per_gpu_hour = " << number(f.per_gpu_hour) << "\n"
        << "per_node_day = " << number(f.per_node_day) << "\n"
        << "recovery_s = " << number(f.recovery_s) << "\n";
}

}  // namespace meridian::config_detail
