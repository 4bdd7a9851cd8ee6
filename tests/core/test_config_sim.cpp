// [sim]: defaults, every key read and written back, and problems named at their key and line.
#include <doctest/doctest.h>

#include <fstream>

#include "core/config/job_config.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::TempDir;
namespace fs = std::filesystem;

namespace {

fs::path job_file(const TempDir& dir, const std::string& sim) {
  const fs::path file = dir / "job.toml";
  std::ofstream(file) << "[data]\npath = \"corpus.txt\"\n[[site]]\nname = \"a\"\n[[site]]\nname = \"b\"\n" << sim;
  return file;
}

std::string problems(const fs::path& file, const std::vector<std::string>& overrides = {}) {
  auto result = try_load_job_config(file, overrides);
  if (std::holds_alternative<JobConfig>(result)) return "";
  std::string all;
  for (const auto& p : std::get<std::vector<ConfigProblem>>(result)) all += p.to_string() + "\n";
  return all;
}

}  // namespace

TEST_CASE("[sim] defaults: a real job simulates as it is, with all five algorithms") {
  TempDir dir("sim-config");
  const JobConfig c = load_job_config(job_file(dir, ""));
  CHECK(c.sim == SimConfig{});
  CHECK(c.sim.algorithms.empty());
  CHECK(c.sim.mfu == 0.4);
}

TEST_CASE("[sim] every key is read, and to_toml writes it back to an equal config") {
  TempDir dir("sim-config");
  const auto file = job_file(dir,
                             "[sim]\ngpus_per_site = 1024\ngpus_per_node = 4\nparams = 1e10\ntokens_per_gpu_step = 65536\n"
                             "step_time_s = 0\nstep_times_s = [0.5, 1]\nstep_overhead_s = 0.01\npeak_tflops = 312\nmfu = 0.35\nintra_bandwidth_gbps = 200\n"
                             "intra_latency_us = 2\ngrad_bytes_per_param = 2\nstartup_s = 60\nregroup_s = 20\n"
                             "token_budget = 1e12\ndays = 30\nalgorithms = [\"diloco\", \"async\", \"diloco\"]\nseed = 5\n"
                             "exchange = \"split\"\n"
                             "[[sim.failure]]\nname = \"gpu\"\nper_gpu_hour = 1e-5\nrecovery_s = 300\n"
                             "[[sim.failure]]\nname = \"power\"\nscope = \"site\"\nper_node_day = 0.001\n");
  const JobConfig c = load_job_config(file);
  CHECK(c.sim.gpus_per_site == 1024);
  CHECK(c.sim.gpus_per_node == 4);
  CHECK(c.sim.params == 1e10);
  CHECK(c.sim.peak_tflops == 312);
  CHECK(c.sim.step_times_s == std::vector<double>{0.5, 1});
  CHECK(c.sim.step_overhead_s == 0.01);
  CHECK(c.sim.days == 30);
  CHECK(c.sim.algorithms == std::vector{SimConfig::Algorithm::Diloco, SimConfig::Algorithm::Async});
  CHECK(c.sim.seed == 5);
  CHECK(c.sim.exchange == SimConfig::Exchange::Split);
  REQUIRE(c.sim.failures.size() == 2);
  CHECK(c.sim.failures[0] == SimConfig::Failure{.name = "gpu", .per_gpu_hour = 1e-5, .recovery_s = 300});
  CHECK(c.sim.failures[1].scope == SimConfig::Failure::Scope::Site);
  CHECK(c.sim.failures[1].per_node_day == 0.001);
  CHECK(c.sim.failures[1].recovery_s == 600);
  const fs::path copy = dir / "copy.toml";
  std::ofstream(copy) << to_toml(c);
  JobConfig again = load_job_config(copy);
  again.source = c.source;
  again.derived = c.derived;
  CHECK(again == c);
}

TEST_CASE("[sim] problems name the key and the line") {
  TempDir dir("sim-config");
  CHECK(problems(job_file(dir, "[sim]\nmfu = 1.5\n")).find("job.toml:8: sim.mfu: expected a number in (0, 1]") !=
        std::string::npos);
  CHECK(problems(job_file(dir, "[sim]\nalgorithms = [\"diloco\", \"ring\"]\n")).find("sim.algorithms: expected an array of") !=
        std::string::npos);
  CHECK(problems(job_file(dir, "[sim]\nalgorithms = []\n")).find("sim.algorithms") != std::string::npos);
  CHECK(problems(job_file(dir, "[sim]\ndays = -1\n")).find("sim.days") != std::string::npos);
  CHECK(problems(job_file(dir, "[sim]\nexchange = \"ring\"\n")).find("sim.exchange") != std::string::npos);
  CHECK(problems(job_file(dir, "[sim]\nstep_times_s = [1.0]\n"))
            .find("sim.step_times_s: expected an array of 2 numbers > 0 (one per [[site]])") != std::string::npos);
  CHECK(problems(job_file(dir, "[sim]\nstep_times_s = [1.0, 0]\n")).find("sim.step_times_s") != std::string::npos);
  CHECK(problems(job_file(dir, "[sim]\ngpu_per_site = 8\n")).find("did you mean gpus_per_site?") != std::string::npos);
  CHECK(problems(job_file(dir, ""), {"sim.step_time_s=\"fast\""}).find("sim.step_time_s") != std::string::npos);
}

TEST_CASE("sim.failure entries: a rate, exactly one, problems name the entry") {
  TempDir dir("sim-config");
  const auto both = problems(job_file(dir, "[[sim.failure]]\nname = \"x\"\nper_gpu_hour = 1\nper_node_day = 1\n"));
  CHECK(both.find("sim.failure[0]: expected a rate: exactly one of per_gpu_hour and per_node_day > 0, found both") !=
        std::string::npos);
  const auto neither = problems(job_file(dir, "[[sim.failure]]\nname = \"x\"\n"));
  CHECK(neither.find("found neither") != std::string::npos);
  const auto unknown = problems(job_file(dir, "[[sim.failure]]\nname = \"x\"\nper_gpu_hour = 1\nrecover_s = 5\n"));
  CHECK(unknown.find("sim.failure[0].recover_s: unknown key (did you mean recovery_s?)") != std::string::npos);
  const auto scope = problems(job_file(dir, "[[sim.failure]]\nname = \"x\"\nper_gpu_hour = 1\nscope = \"rack\"\n"));
  CHECK(scope.find("sim.failure[0].scope") != std::string::npos);
  const auto nameless = problems(job_file(dir, "[[sim.failure]]\nper_gpu_hour = 1\n"));
  CHECK(nameless.find("sim.failure[0].name: missing required key") != std::string::npos);
}
