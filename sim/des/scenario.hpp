#pragma once
// A simulated job, resolved to plain numbers (seconds, bytes, tokens): what the engine runs.
// build_scenario() makes one from a job file; tests write one by hand.
#include <cstdint>
#include <string>
#include <vector>

#include "core/config/job_config.hpp"
#include "sim/des/wan_model.hpp"

namespace meridian::sim {

using Algorithm = SimConfig::Algorithm;

struct SiteModel {
  std::string name;
  int gpus = 1;
  double step_s = 1;          // one inner step: compute and in-site all-reduce
  double step_overhead_s = 0; // per inner step, outside it (bookkeeping): neither compute nor waiting
  double tokens_per_step = 0; // all of the site's GPUs together
};

struct FailureClass {
  std::string name;
  bool whole_site = false;
  double per_gpu_s = 0;  // rate per GPU-second
  double recovery_s = 0;
};

// A failure at a fixed time, besides the random ones: what-if runs and tests that need one exactly.
struct Outage {
  int site = 0;
  double at_s = 0;
  bool whole_site = false;
  double recovery_s = 0;
};

struct Scenario {
  std::vector<SiteModel> sites;
  WanModel wan;
  double params = 0;
  double delta_bytes = 0;  // one site's encoded pseudo-gradient (all fragments)
  double grad_bytes = 0;   // one site's mean gradients, as sync sends them every step
  double state_bytes = 0;  // a peer's state for a rejoining site: weights and outer momentum
  // Deltas (and sync's gradients) go split between the sites' GPUs, one flow per overlap of their
  // cuts (transfer_parallelism), instead of one flow from leader to leader.
  bool split_exchange = false;
  int inner_steps = 50;    // H
  // [outer] early_inner_steps, early_steps: DiLoCo's rounds are that long until that step.
  int early_inner_steps = 0;
  int early_steps = 0;
  int fragments = 1;       // streaming: fragments synchronised in turn, H / fragments steps apart
  int max_staleness = 4;
  int quorum = 0;            // async: deltas a commit waits for; 0 = a majority of the live sites
  double deadline_s = 0;     // async: after the first delta of a version; 0 = adaptive
  double deadline_k = 3;     // adaptive deadline = median + k * MAD of recent arrival lags
  double lease_ttl_s = 5;
  double regroup_s = 30;
  double startup_s = 0;
  double round_time_cv = 0;  // each round's compute: max(0.05, 1 + cv x N(0, 1)) times its mean
  int eval_every = 0;        // steps between evaluations (0: only at the end)
  double eval_s = 0;         // one evaluation
  std::int64_t steps = 0;    // per site, when neither a token budget nor a time limit is set
  double token_budget = 0;
  double horizon_s = 0;
  std::vector<FailureClass> failures;
  std::vector<Outage> outages;
  std::uint64_t seed = 1;
};

// Bytes per parameter of an encoded delta; block-quantised codecs pay one fp32 scale per block.
double codec_bytes_per_param(const JobConfig::Outer& outer);
// Forward and backward of a dense transformer: 6 x params x tokens.
double step_compute_s(double params, double tokens, double peak_tflops, double mfu);
// Ring all-reduce of `bytes` over n members: 2(n-1)/n x bytes / bandwidth + 2(n-1) hops of latency.
double ring_allreduce_s(double bytes, int n, double bandwidth_bytes_per_s, double hop_latency_s);

// The scenario a job file describes, its [sim] section filling in what a real run would measure.
Scenario build_scenario(const JobConfig& job);

}  // namespace meridian::sim
