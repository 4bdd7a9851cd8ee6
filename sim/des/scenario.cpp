#include "sim/des/scenario.hpp"

#include <algorithm>

#include "core/model/param_layout.hpp"

namespace meridian::sim {

double codec_bytes_per_param(const JobConfig::Outer& outer) {
  using Codec = JobConfig::Outer::Codec;
  const int block = std::max(1, outer.block);
  const double scale = 4.0 / block;
  switch (outer.codec) {
    case Codec::Fp32: return 4;
    case Codec::Bf16: return 2;
    case Codec::Int8: return 1 + scale;
    case Codec::Int4: return 0.5 + scale;
    case Codec::Sparse: {  // two levels, a u16 position and two bits per kept entry (crosssite/codec)
      const int keep = std::min(block, outer.sparse_keep());
      return (8.0 + 2.0 * keep + (keep + 3) / 4) / block;
    }
  }
  return 4;
}

double step_compute_s(double params, double tokens, double peak_tflops, double mfu) {
  return 6 * params * tokens / (peak_tflops * 1e12 * mfu);
}

double ring_allreduce_s(double bytes, int n, double bandwidth_bytes_per_s, double hop_latency_s) {
  if (n <= 1) return 0;
  const double hops = 2.0 * (n - 1);
  return hops / n * bytes / bandwidth_bytes_per_s + hops * hop_latency_s;
}

namespace {

// One inner step of a site of `gpus` GPUs: measured, or FLOPs at the given MFU plus the ring
// all-reduce of the gradients (hidden behind backward when [replicas] overlap_allreduce).
double site_step_s(const JobConfig& job, double params, double tokens_per_gpu, int gpus) {
  const SimConfig& s = job.sim;
  if (s.step_time_s > 0) return s.step_time_s;
  const double compute = step_compute_s(params, tokens_per_gpu, s.peak_tflops, s.mfu);
  const double reduce = ring_allreduce_s(params * s.grad_bytes_per_param, gpus, s.intra_bandwidth_gbps * 1e9 / 8,
                                         s.intra_latency_us * 1e-6);
  return job.replicas.overlap_allreduce ? std::max(compute, reduce) : compute + reduce;
}

// The [wan] links of every pair, and its faults on site indices.
WanModel wan_of(const JobConfig& job, std::uint64_t seed) {
  const int n = static_cast<int>(job.sites.size());
  WanModel wan(n, job.wan.link, seed);
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) wan.set_link(a, b, wan_link(job, job.sites[a].name, job.sites[b].name));
  using Kind = JobConfig::Wan::Fault::Kind;
  for (const auto& f : job.wan.faults) {
    WanFault fault{.kind = f.kind == Kind::Partition   ? WanFault::Kind::Partition
                           : f.kind == Kind::Bandwidth ? WanFault::Kind::Bandwidth
                                                       : WanFault::Kind::Latency,
                   .sites = {},
                   .pair = f.pair,
                   .from_s = f.from_s,
                   .to_s = f.to_s,
                   .bandwidth_mbps = f.bandwidth_mbps,
                   .latency_ms = f.latency_ms};
    for (const auto& name : f.sites)
      for (int s = 0; s < n; ++s)
        if (job.sites[s].name == name) fault.sites.push_back(s);
    wan.add_fault(std::move(fault));
  }
  return wan;
}

}  // namespace

Scenario build_scenario(const JobConfig& job) {
  const SimConfig& s = job.sim;
  Scenario sc;
  sc.params = s.params > 0 ? s.params : static_cast<double>(ParamLayout::of(job.model).total());
  const double tokens_per_gpu = s.tokens_per_gpu_step > 0
                                    ? s.tokens_per_gpu_step
                                    : static_cast<double>(job.inner.batch_per_replica) * job.inner.grad_accum *
                                          job.model.seq_len;
  for (std::size_t i = 0; i < job.sites.size(); ++i) {
    const auto& site = job.sites[i];
    SiteModel m;
    m.name = site.name;
    m.gpus = s.gpus_per_site > 0 ? s.gpus_per_site : site.replicas;
    // A measured time per site is taken as it is; else [[site]] speed is relative: a site of
    // speed 2 takes half the time per step.
    m.step_s = !s.step_times_s.empty() ? s.step_times_s[i]
                                       : site_step_s(job, sc.params, tokens_per_gpu, m.gpus) / site.speed;
    m.step_overhead_s = s.step_overhead_s;
    m.tokens_per_step = tokens_per_gpu * m.gpus;
    sc.sites.push_back(m);
  }
  sc.seed = s.seed != 0 ? s.seed : job.job.seed;
  sc.wan = wan_of(job, sc.seed);
  sc.delta_bytes = sc.params * codec_bytes_per_param(job.outer);
  sc.grad_bytes = sc.params * 4;   // sync sends fp32 mean gradients (sites/replica/site_exchange)
  sc.state_bytes = sc.params * 8;  // OuterState::snapshot: fp32 weights and outer momentum
  sc.split_exchange = s.exchange == SimConfig::Exchange::Split;
  sc.inner_steps = job.outer.inner_steps;
  sc.early_inner_steps = job.outer.early_inner_steps;
  sc.early_steps = job.outer.early_steps;
  sc.fragments = job.outer.fragments;
  sc.max_staleness = job.outer.max_staleness;
  sc.quorum = job.outer.quorum;
  sc.deadline_s = job.outer.deadline_ms / 1000.0;
  sc.deadline_k = job.outer.deadline_k;
  sc.lease_ttl_s = job.control.lease_ttl_s;
  sc.regroup_s = s.regroup_s;
  sc.startup_s = s.startup_s;
  sc.round_time_cv = s.step_time_cv;
  // An evaluation is a forward pass (a third of a training step's FLOPs per token) over
  // eval_windows windows, against the batch a step trains on.
  const double step_windows = static_cast<double>(job.inner.batch_per_replica) * job.inner.grad_accum;
  const double slowest = std::max_element(sc.sites.begin(), sc.sites.end(), [](const auto& a, const auto& b) {
                           return a.step_s < b.step_s;
                         })->step_s;
  sc.eval_every = job.log.eval_every;
  sc.eval_s = slowest * job.log.eval_windows / step_windows / 3;
  sc.steps = job.inner.steps;
  sc.token_budget = s.token_budget;
  sc.horizon_s = s.days * 86400;
  for (const auto& f : s.failures) {
    const int per_node = std::max(1, s.gpus_per_node);
    sc.failures.push_back({.name = f.name,
                           .whole_site = f.scope == SimConfig::Failure::Scope::Site,
                           .per_gpu_s = f.per_gpu_hour / 3600 + f.per_node_day / per_node / 86400,
                           .recovery_s = f.recovery_s});
  }
  return sc;
}

}  // namespace meridian::sim
