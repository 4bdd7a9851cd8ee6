#pragma once
// A job over three text shards of tiny shakespeare from two weighted [[data.source]] entries (a glob
// and a directory), 24 steps of the tiny model: what the data path's resume tests train.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/support/temp_dir.hpp"

namespace meridian::testing {

// Tiny shakespeare in three text shards: two of source "plays" (weight 3), one of "sonnets" (1).
inline std::filesystem::path write_mixed_job(const TempDir& dir) {
  std::ifstream in(source_dir() / "data/tinyshakespeare/input.txt", std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t third = text.size() / 3;
  std::filesystem::create_directories(dir / "plays");
  std::filesystem::create_directories(dir / "sonnets");
  std::ofstream(dir / "plays" / "part_0.txt", std::ios::binary) << text.substr(0, third);
  std::ofstream(dir / "plays" / "part_1.txt", std::ios::binary) << text.substr(third, third);
  std::ofstream(dir / "sonnets" / "part_2.txt", std::ios::binary) << text.substr(2 * third);
  const auto file = dir / "job.toml";
  std::ofstream(file) << "[job]\nname = \"mix\"\nseed = 7\n[model]\npreset = \"tiny\"\n"
                      << "[data]\nval_fraction = 0.05\n"
                      << "[[data.source]]\npath = \"plays/part_*.txt\"\nweight = 3\n"
                      << "[[data.source]]\npath = \"sonnets\"\nweight = 1\n"
                      << "[inner]\nlr = 3e-3\nwarmup_steps = 2\nbatch_per_replica = 4\nsteps = 24\n"
                      << "[log]\nevery = 1\neval_every = 0\neval_windows = 8\n";
  return file;
}

}  // namespace meridian::testing
