// The trainer on a job's data as users give it: three shards from two weighted [[data.source]]
// entries (a glob and a directory), a run stopped part-way and resumed from its checkpoint gives
// the uninterrupted run's losses bit for bit, and the windows each source gave follow the weights.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/io/env.hpp"
#include "core/runlog/run_log.hpp"
#include "core/train/trainer.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_job.hpp"

using namespace meridian;
using meridian::testing::fake_clock;
using meridian::testing::source_dir;
using meridian::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// Tiny shakespeare in three text shards: two of source "plays" (weight 3), one of "sonnets" (1).
fs::path write_mixed_job(const TempDir& dir) {
  std::ifstream in(source_dir() / "data/tinyshakespeare/input.txt", std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t third = text.size() / 3;
  fs::create_directories(dir / "plays");
  fs::create_directories(dir / "sonnets");
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

std::vector<double> logged_losses(const fs::path& run_dir) {
  std::ifstream in(run_dir / "metrics.jsonl");
  std::vector<double> losses;
  for (std::string line; std::getline(in, line);)
    if (const auto j = nlohmann::json::parse(line); j.contains("loss")) losses.push_back(j["loss"].get<double>());
  return losses;
}

}  // namespace

TEST_CASE("two weighted sources over three shards: stopped and resumed equals uninterrupted, and the mix follows the weights") {
  TempDir dir("trainer_data");
  const fs::path job = write_mixed_job(dir);
  const JobConfig straight_cfg = load_job_config(job, {"job.run_dir=" + (dir / "straight").string()});
  RunLog straight_log(straight_cfg.job.run_dir);
  Trainer straight(straight_cfg, posix_env(), straight_log, nullptr, fake_clock);
  straight.run();
  const auto expected = logged_losses(straight_cfg.job.run_dir);
  REQUIRE(expected.size() == 24);

  const JobConfig cfg = load_job_config(job, {"job.run_dir=" + (dir / "resumed").string()});
  {
    RunLog log(cfg.job.run_dir);
    Trainer first(cfg, posix_env(), log, nullptr, fake_clock);
    first.run(11);  // 44 windows in: within a shard of each source
  }
  RunLog log(cfg.job.run_dir);
  Trainer second(cfg, posix_env(), log, nullptr, fake_clock);
  CHECK(second.run().resumed_from_step == 11);
  const auto losses = logged_losses(cfg.job.run_dir);
  REQUIRE(losses.size() == 24);
  for (int i = 0; i < 24; ++i) CHECK_MESSAGE(losses[i] == expected[i], "step ", i);
  CHECK(second.state().data == straight.state().data);

  // 96 windows, a quarter of them the sonnets', within a window or two.
  const auto& taken = straight.state().data.taken;
  REQUIRE(taken.size() == 2);
  MESSAGE("realised mix over 96 windows: ", taken[0], " : ", taken[1], " (weights 3 : 1)");
  CHECK(taken[0] + taken[1] == 96);
  CHECK(std::abs(static_cast<double>(taken[1]) - 24.0) <= 2.0);
}
