// The simulator's speed: bench/sim_scale.toml (16 sites x 1,024 GPUs, 30 simulated days, failures)
// under every algorithm, `runs` times each; prints each algorithm's median wall time and events
// per second, and, as the floor measured in the same run, a bare std::priority_queue pushing and
// popping the same number of events.
#include <cstdio>
#include <cstdlib>
#include <queue>

#include "bench/stats.hpp"
#include "core/config/job_config.hpp"
#include "sim/des/engine.hpp"
#include "sim/des/event_queue.hpp"

using namespace meridian;
using namespace meridian::sim;

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 5;
  const std::string file = argc > 2 ? argv[2] : std::string(MERIDIAN_SOURCE_DIR) + "/bench/sim_scale.toml";
  const JobConfig job = load_job_config(file);
  const Scenario sc = build_scenario(job);
  std::printf("%s: %zu sites x %d GPUs, %.0f simulated days, %d runs per algorithm\n", file.c_str(),
              sc.sites.size(), sc.sites[0].gpus, sc.horizon_s / 86400, runs);
  std::printf("%-10s %10s %12s %12s %10s %10s\n", "algorithm", "median s", "events", "events/s", "util", "floor s");
  double total = 0;
  for (Algorithm a : {Algorithm::Sync, Algorithm::Diloco, Algorithm::Overlap, Algorithm::Streaming, Algorithm::Async}) {
    std::vector<double> times;
    Result r;
    for (int i = 0; i < runs; ++i) {
      const auto t0 = bench::Clock::now();
      r = simulate(sc, a);
      times.push_back(bench::seconds_since(t0));
    }
    // The floor: the same number of events through a bare heap, in time order with ties.
    std::vector<double> floor;
    for (int i = 0; i < runs; ++i) {
      const auto t0 = bench::Clock::now();
      EventQueue q;
      double t = 0;
      for (std::uint64_t e = 0; e < r.events; ++e) {
        q.schedule({.t = t + static_cast<double>(e % 17)});
        if (q.size() > 64) t = q.pop().t;
      }
      while (!q.empty()) q.pop();
      floor.push_back(bench::seconds_since(t0));
    }
    const double m = bench::median(times);
    total += m;
    std::printf("%-10s %10.3f %12llu %12.3g %9.1f%% %10.3f\n", std::string(to_string(a)).c_str(), m,
                static_cast<unsigned long long>(r.events), static_cast<double>(r.events) / m,
                100 * r.compute_utilization, bench::median(floor));
  }
  std::printf("all five: %.3f s (sum of medians)\n", total);
  return 0;
}
