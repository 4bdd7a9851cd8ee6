#pragma once
// `meridian sim` without the command line: simulate a job under each algorithm it compares and
// write the results into a folder (sim.json, comparison.md, timeline-<algorithm>.svg and .csv).
#include <filesystem>
#include <string>
#include <vector>

#include "core/config/job_config.hpp"
#include "sim/des/result.hpp"
#include "sim/des/scenario.hpp"

namespace meridian::sim {

struct SimRun {
  Scenario scenario;
  std::vector<Result> results;      // in the order of [sim] algorithms (all five when empty)
  std::vector<double> seconds;      // how long each simulation took on this machine
};

SimRun run_sim(const JobConfig& job);

// The simulated algorithm a real run of the job is: its [outer] algorithm, DiLoCo split by overlap.
Algorithm job_algorithm(const JobConfig& job);

// Writes the run's files into `dir` (created if needed); returns the paths written.
std::vector<std::filesystem::path> write_sim(const SimRun& run, const JobConfig& job, const std::filesystem::path& dir);

}  // namespace meridian::sim
