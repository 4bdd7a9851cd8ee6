#pragma once
// [sim]: what `meridian sim` needs beyond the job itself to predict a run at a size this machine
// cannot run. Every key has a default that makes a real job file simulate as it would run here.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace meridian {

struct SimConfig {
  // The algorithms the simulator compares; "overlap" is DiLoCo with [outer] overlap, "async" is
  // overlapped DiLoCo committing by quorum or deadline with staleness-weighted late deltas.
  enum class Algorithm { Sync, Diloco, Overlap, Streaming, Async };
  // How a site's delta crosses the WAN: from its leader in one flow per peer site (what a site
  // runs), or split, each replica sending its 1/M share to the replicas of the peer that hold
  // the same units, one flow per overlap of the two sites' cuts (INTELLECT-1's way; a what-if
  // here: a site does not run it yet). The flows matter under [wan] stream_mbps.
  enum class Exchange { Leader, Split };

  // One class of failures (a row of a failure table such as Llama 3's), as a Poisson process.
  struct Failure {
    enum class Scope { Replica, Site };  // one GPU's replica restarts, or the whole site goes away
    std::string name;
    Scope scope = Scope::Replica;
    double per_gpu_hour = 0;  // rate per GPU-hour ...
    double per_node_day = 0;  // ... or per node-day (gpus_per_node GPUs); exactly one is > 0
    double recovery_s = 600;  // until the replica is back (restarted, healed) or the site is up again
    bool operator==(const Failure&) const = default;
  };

  int gpus_per_site = 0;   // 0: each [[site]]'s replicas
  int gpus_per_node = 8;   // for rates per node-day
  double params = 0;       // model parameters; 0: the job's [model]
  double tokens_per_gpu_step = 0;  // 0: batch_per_replica x grad_accum x seq_len
  // Measured seconds per inner step (compute and in-site all-reduce); 0: from FLOPs (6 x params x
  // tokens per GPU step at peak_tflops x mfu) plus the ring all-reduce below.
  double step_time_s = 0;
  std::vector<double> step_times_s;  // per [[site]], in order: measured step times that differ by site
  double step_overhead_s = 0;        // per inner step, outside it: logging, polling links and etcd
  // Spread of a round's compute time (coefficient of variation): each round of each site takes
  // max(0.05, 1 + cv x N(0, 1)) times its mean. Stragglers, shared machines, thermal throttling.
  double step_time_cv = 0;
  double peak_tflops = 989;  // H100 SXM dense bf16
  double mfu = 0.4;
  double intra_bandwidth_gbps = 400;  // per GPU, for the in-site ring all-reduce
  double intra_latency_us = 5;        // per ring hop
  double grad_bytes_per_param = 4;    // what the in-site all-reduce moves per parameter
  double startup_s = 0;   // before a site's first step (processes, rendezvous, first state)
  double regroup_s = 30;  // a site's pause when one of its replicas fails or rejoins
  double token_budget = 0;  // tokens the job's model must learn from; 0: [inner] steps per site
  double days = 0;          // simulated time limit; 0: until the budget (or the steps) are done
  std::vector<Algorithm> algorithms;  // empty: all five
  Exchange exchange = Exchange::Leader;
  std::uint64_t seed = 0;  // 0: [job] seed
  std::vector<Failure> failures;
  bool operator==(const SimConfig&) const = default;
};

std::string_view to_string(SimConfig::Algorithm a);
std::string_view to_string(SimConfig::Failure::Scope s);
std::string_view to_string(SimConfig::Exchange e);

}  // namespace meridian
