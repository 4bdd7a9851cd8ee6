// `meridian sim` end to end on a job file: the table on stdout, the files, and clear errors.
#include <doctest/doctest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/support/run_process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::TempDir;
namespace fs = std::filesystem;

namespace {
meridian::testing::ProcessResult meridian_sim(std::vector<std::string> args) {
  args.insert(args.begin(), {MERIDIAN_BIN, "sim"});
  return meridian::testing::run_process(args);
}
}  // namespace

TEST_CASE("sim: the demo job with a measured step time, every algorithm, files written") {
  TempDir dir("sim");
  const auto r = meridian_sim({(meridian::testing::source_dir() / "configs/demo.toml").string(), "--out",
                               dir.path().string(), "--set", "sim.step_time_s=0.05", "--set", "inner.steps=300",
                               "--set", "wan.latency_ms=50", "--set", "wan.bandwidth_mbps=100"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
  for (const char* name : {"| sync |", "| diloco |", "| overlap |", "| streaming |", "| async |"})
    CHECK(r.out.find(name) != std::string::npos);
  for (const char* file : {"sim.json", "comparison.md", "timeline-diloco.svg", "timeline-sync.csv"})
    CHECK(fs::exists(dir / file));
  std::ifstream in(dir / "sim.json");
  const auto j = nlohmann::json::parse(in);
  REQUIRE(j["results"].size() == 5);
  const auto& diloco = j["results"][1];
  CHECK(diloco["algorithm"] == "diloco");
  CHECK(diloco["sites"].size() == 3);
  // 300 steps of 0.05 s in 6 rounds; each round's int8 delta (~0.83 MB) takes ~67 ms at 100 Mbit/s.
  CHECK(diloco["compute_utilization"].get<double>() > 0.5);
  CHECK(diloco["compute_utilization"].get<double>() < 0.99);
  CHECK(j["scenario"]["steps"] == 300);
  CHECK(j["job_algorithm"] == "overlap");  // the demo's DiLoCo overlaps by default
}

TEST_CASE("sim: [sim] algorithms picks the rows, a bad [sim] key exits 78 (config) naming it") {
  TempDir dir("sim");
  const auto job = (meridian::testing::source_dir() / "configs/demo.toml").string();
  const auto ok = meridian_sim({job, "--out", dir.path().string(), "--set", "sim.algorithms=[\"async\"]"});
  REQUIRE_MESSAGE(ok.exit_code == 0, ok.describe());
  CHECK(ok.out.find("| async |") != std::string::npos);
  CHECK(ok.out.find("| sync |") == std::string::npos);
  const auto bad = meridian_sim({job, "--out", dir.path().string(), "--set", "sim.mfu=2"});
  CHECK(bad.exit_code == 78);
  CHECK(bad.err.find("sim.mfu") != std::string::npos);
  const auto unknown = meridian_sim({job, "--set", "sim.algorithms=[\"ring\"]"});
  CHECK(unknown.exit_code == 78);
  CHECK(unknown.err.find("sim.algorithms") != std::string::npos);
}
