#pragma once
// The deterministic protocol simulator (issue 16): N sites' real cross-site round code (CrossSite,
// OuterState, the commit rule, the codecs) in one thread, on one virtual clock, over an in-memory
// control plane and a simulated network, under a random fault schedule drawn from one seed. A
// seed costs milliseconds and replays bit-exactly: `meridian-protosim --seed N --trace` prints what
// every site did. After the run the Checker judges the invariants; liveness is judged here.
#include <cstdint>
#include <string>
#include <vector>

#include "sim/protocol/sim_site.hpp"

namespace meridian {

struct SimOptions {
  int sites = 3;
  int faults = 24;
  std::int64_t rounds = 24;
  double tick_s = 0.05;  // how often each site looks, in virtual seconds
  ProtocolMutations mutations;
  DriverMutations driver;
  bool trace = false;
};

struct SimOutcome {
  std::uint64_t seed = 0;
  std::vector<std::string> violations;
  std::vector<std::string> trace;  // with SimOptions::trace
  double virtual_s = 0;            // when the last site finished (or the run gave up)
  double liveness_bound_s = 0;     // by when after the last fault every site had to finish
  int faults = 0;
  std::int64_t versions = 0;
  bool overlap = true;
  bool ok() const { return violations.empty(); }
};

SimOutcome simulate(std::uint64_t seed, const SimOptions& options);

}  // namespace meridian
