#pragma once
// The discrete-event simulation of one algorithm on one scenario: sites run rounds of inner
// steps, announce deltas whose bytes cross the WAN, versions are committed by the commit rule
// and applied, failures strike as Poisson processes. Deterministic: a function of the scenario
// (its seed included) and the algorithm.
#include "sim/des/result.hpp"
#include "sim/des/scenario.hpp"

namespace meridian::sim {

Result simulate(const Scenario& scenario, Algorithm algorithm);

// How each algorithm runs in the engine: steps per round, bytes per delta, how many of a site's
// own rounds may be announced and unmerged before it waits, and when a version is due.
struct AlgorithmShape {
  int round_steps = 1;
  int early_round_steps = 0, early_steps = 0;  // rounds of early_round_steps before step early_steps
  double delta_bytes = 0;
  int backlog = 0;  // 0: wait for the version after each round; 1: overlap by one round
  bool async = false;
  bool commit_record = true;  // sync has none: each site averages once it holds every gradient
};
AlgorithmShape shape_of(const Scenario& scenario, Algorithm algorithm);

}  // namespace meridian::sim
