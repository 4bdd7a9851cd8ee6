#pragma once
// A scenario small enough to work out by hand: n one-GPU sites of one second per step and 100
// tokens per step, links with no latency at 8 Mbit/s (1 MB/s: a 1 MB delta takes one second; no
// burst allowance, so that it takes exactly that).
#include "sim/des/scenario.hpp"

namespace meridian::sim::testing {

inline Scenario hand_scenario(int sites, double delta_bytes, int inner_steps = 10, std::int64_t steps = 100) {
  Scenario sc;
  for (int s = 0; s < sites; ++s) {
    std::string name = "s";
    name.push_back(static_cast<char>('0' + s));  // "s0".."s9" (std::to_string drew a false -Wrestrict from GCC 12)
    sc.sites.push_back({.name = name, .gpus = 1, .step_s = 1, .tokens_per_step = 100});
  }
  sc.wan = WanModel(sites, WanLink{.latency_ms = 0, .bandwidth_mbps = 8}, 1, LinkModelOptions{.burst_bytes = 0});
  sc.params = delta_bytes;
  sc.delta_bytes = delta_bytes;
  sc.grad_bytes = delta_bytes;
  sc.state_bytes = 2 * delta_bytes;
  sc.inner_steps = inner_steps;
  sc.steps = steps;
  sc.regroup_s = 3;
  return sc;
}

}  // namespace meridian::sim::testing
