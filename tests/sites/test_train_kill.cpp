// `meridian train` on two weighted sources over three shards, killed with SIGKILL part-way (in the
// middle of a shard: windows come from every shard at once) and relaunched: every step's loss
// equals the uninterrupted run's, bit for bit, the steps it trained twice included.
#include <doctest/doctest.h>

#include <csignal>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "tests/support/child_process.hpp"
#include "tests/support/jsonl.hpp"
#include "tests/support/mixed_sources.hpp"
#include "tests/support/run_meridian.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian::testing;

TEST_CASE("kill -9 of meridian train over weighted sources, relaunched: the uninterrupted run's losses") {
  TempDir dir("train_kill");
  const std::string job = write_mixed_job(dir).string();
  // Without the divergence guard, whose rollbacks log some steps twice: each step's loss is one.
  const std::vector<std::string> sets{"--set", "inner.steps=400", "--set", "checkpoint.every=10", "--set",
                                      "guard.enabled=false"};
  const auto args = [&](const std::string& run) {
    std::vector<std::string> a{"train", "--config", job, "--set", "job.run_dir=\"" + (dir / run).string() + "\""};
    a.insert(a.end(), sets.begin(), sets.end());
    return a;
  };
  const auto straight = run_meridian(args("straight"));
  REQUIRE_MESSAGE(straight.exit_code == 0, straight.describe());

  // One thread, as run_meridian's runs: OpenBLAS's sums follow the thread count.
  ::setenv("OMP_NUM_THREADS", "1", 1);
  std::vector<std::string> argv{MERIDIAN_BIN};
  const auto killed_args = args("killed");
  argv.insert(argv.end(), killed_args.begin(), killed_args.end());
  {
    ChildProcess child(argv, dir / "killed.log");
    REQUIRE(wait_for_step(dir / "killed", 25));
    ::kill(child.pid(), SIGKILL);
    CHECK(child.wait_for(std::chrono::seconds(10)) == 128 + SIGKILL);
  }
  const auto relaunched = run_meridian(args("killed"));
  REQUIRE_MESSAGE(relaunched.exit_code == 0, relaunched.describe());
  CHECK((relaunched.out + relaunched.err).find("resumed from") != std::string::npos);

  std::map<int, double> expected;
  for (const auto& m : read_jsonl(dir / "straight" / "metrics.jsonl"))
    if (m.contains("loss")) expected[m["step"].get<int>()] = m["loss"].get<double>();
  REQUIRE(expected.size() == 400);
  std::size_t compared = 0;
  for (const auto& m : read_jsonl(dir / "killed" / "metrics.jsonl")) {
    if (!m.contains("loss")) continue;
    const int step = m["step"].get<int>();
    CHECK_MESSAGE(m["loss"].get<double>() == expected.at(step), "step ", step);
    ++compared;
  }
  CHECK(compared >= 400);
  const auto summary = [&](const char* run) { return nlohmann::json::parse(file_text(dir / run / "summary.json")); };
  CHECK(summary("killed")["final_val_loss"] == summary("straight")["final_val_loss"]);
}
