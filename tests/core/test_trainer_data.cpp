// The trainer on a job's data as users give it: three shards from two weighted [[data.source]]
// entries (a glob and a directory), a run stopped part-way and resumed from its checkpoint gives
// the uninterrupted run's losses bit for bit, and the windows each source gave follow the weights.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/io/env.hpp"
#include "core/runlog/run_log.hpp"
#include "core/train/trainer.hpp"
#include "tests/support/jsonl.hpp"
#include "tests/support/mixed_sources.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_job.hpp"

using namespace meridian;
using meridian::testing::fake_clock;
using meridian::testing::write_mixed_job;
using meridian::testing::logged_losses;
using meridian::testing::TempDir;
namespace fs = std::filesystem;

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
