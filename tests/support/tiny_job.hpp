#pragma once
// A tiny training job on the bundled corpus (2 layers x 32 channels, context 32, 4 sequences a
// step, 20 steps, no evaluation), for the trainer's tests; `extra` are --set overrides.
#include <fstream>
#include <string>
#include <vector>

#include "core/config/job_config.hpp"
#include "tests/support/temp_dir.hpp"

namespace meridian::testing {

inline JobConfig tiny_job(const TempDir& dir, const std::string& run, std::vector<std::string> extra = {}) {
  const auto file = dir / "job.toml";
  std::ofstream(file) << "[job]\nname = \"t\"\nseed = 7\n"
                      << "[model]\npreset = \"tiny\"\n"
                      << "[data]\npath = \"" << (source_dir() / "data/tinyshakespeare/input.txt").string() << "\"\n"
                      << "[inner]\nlr = 3e-3\nwarmup_steps = 2\nbatch_per_replica = 4\nsteps = 20\n"
                      << "[log]\nevery = 1\neval_every = 0\neval_windows = 8\n";
  extra.push_back("job.run_dir=" + (dir / run).string());
  return load_job_config(file, extra);
}

// A clock that moves 10 ms every time it is read.
inline double fake_clock() {
  static double t = 0;
  return t += 0.01;
}

}  // namespace meridian::testing
