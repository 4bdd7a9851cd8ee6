// The trainer on a job's data as users give it: three shards from two weighted [[data.source]]
// entries (a glob and a directory), a run stopped part-way and resumed from its checkpoint gives
// the uninterrupted run's losses bit for bit, and the windows each source gave follow the weights.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/train/trainer.hpp"
#include "tests/support/jsonl.hpp"
#include "tests/support/mixed_sources.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/trainer_runs.hpp"

using namespace meridian;
using meridian::testing::write_mixed_job;
using meridian::testing::logged_losses;
using meridian::testing::ResumedRun;
using meridian::testing::TempDir;
using meridian::testing::TrainerRun;
namespace fs = std::filesystem;

TEST_CASE("two weighted sources over three shards: stopped and resumed equals uninterrupted, and the mix follows the weights") {
  TempDir dir("trainer_data");
  const fs::path job = write_mixed_job(dir);
  const JobConfig straight_cfg = load_job_config(job, {"job.run_dir=" + (dir / "straight").string()});
  TrainerRun straight(straight_cfg);
  const auto expected = logged_losses(straight_cfg.job.run_dir);
  REQUIRE(expected.size() == 24);

  const JobConfig cfg = load_job_config(job, {"job.run_dir=" + (dir / "resumed").string()});
  ResumedRun resumed(cfg, 11);  // 44 windows in: within a shard of each source
  CHECK(resumed.summary.resumed_from_step == 11);
  const auto losses = logged_losses(cfg.job.run_dir);
  REQUIRE(losses.size() == 24);
  for (int i = 0; i < 24; ++i) CHECK_MESSAGE(losses[i] == expected[i], "step ", i);
  CHECK(resumed.trainer.state().data == straight.trainer.state().data);

  // 96 windows, a quarter of them the sonnets', within a window or two.
  const auto& taken = straight.trainer.state().data.taken;
  REQUIRE(taken.size() == 2);
  MESSAGE("realised mix over 96 windows: ", taken[0], " : ", taken[1], " (weights 3 : 1)");
  CHECK(taken[0] + taken[1] == 96);
  CHECK(std::abs(static_cast<double>(taken[1]) - 24.0) <= 2.0);
}
