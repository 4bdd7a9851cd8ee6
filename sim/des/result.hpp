#pragma once
// What one simulated run predicts: per site where its time went, over the job the figures a real
// run's summary.json reports (compute utilization, wall time, WAN bytes) plus goodput.
#include <cstdint>
#include <string>
#include <vector>

#include "core/config/sim_config.hpp"

namespace meridian::sim {

enum class Phase : std::uint8_t { Compute, Wait, Down, Overhead };
std::string_view to_string(Phase p);

struct Segment {
  double t0 = 0, t1 = 0;
  Phase phase = Phase::Compute;
};

struct SiteResult {
  std::string name;
  double compute_s = 0;   // inner steps, including work later lost or dropped
  double wait_s = 0;      // waiting on other sites (a version, its own backlog to drain)
  double down_s = 0;      // failures: regrouping, site down, fetching a peer's state
  double overhead_s = 0;  // start-up and evaluations
  double useful_s = 0;    // compute whose delta was merged into a version
  double end_s = 0;       // when the site finished (or the simulation stopped)
  std::int64_t steps = 0, rounds = 0;
  int replica_failures = 0, site_failures = 0;
  std::vector<Segment> timeline;  // contiguous from 0 to end_s
  double utilization() const { return end_s > 0 ? compute_s / end_s : 0; }
};

struct Result {
  SimConfig::Algorithm algorithm = SimConfig::Algorithm::Diloco;
  double wall_s = 0;
  double tokens = 0;  // tokens the job's model learned from: those of merged deltas
  bool budget_reached = false;
  double wan_bytes = 0;  // sent between sites: deltas (or gradients) and state transfers
  std::int64_t versions = 0, deltas_merged = 0, deltas_dropped = 0;
  double mean_staleness = 0;       // over merged deltas, in versions
  double compute_utilization = 0;  // the mean over sites of compute / wall, as summary.json measures it
  double goodput = 0;              // merged compute over all sites' time
  std::uint64_t events = 0;
  std::vector<SiteResult> sites;
};

}  // namespace meridian::sim
