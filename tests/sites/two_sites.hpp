#pragma once
// Two sites end to end as `meridian site` processes on loopback against a real etcd: a job file of
// sites a and b, running them to the end (or killing a replica of a mid-run), and what their
// events and metrics say. Shared by the tests of tests/sites/test_site_exchange.cpp and
// test_site_shards.cpp.
#include <doctest/doctest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/child_process.hpp"
#include "tests/support/etcd_server.hpp"
#include "tests/support/jsonl.hpp"
#include "tests/support/temp_dir.hpp"

namespace meridian::testing {

using nlohmann::json;

// 12 steps of inner SGD, every loss logged.
inline const std::string kShortSgd = "[inner]\noptimizer = \"sgd\"\nlr = 0.5\nclip = 0\nbatch_per_replica = 2\nsteps = 12\n"
                              "[log]\nevery = 1\neval_every = 0\neval_windows = 4\n";

inline std::filesystem::path write_job(const TempDir& dir, const std::string& name, const std::string& outer,
                                const std::string& site_b = "", const std::string& inner = kShortSgd, int seed = 5,
                                const std::string& site_a = "") {
  const auto file = dir / (name + ".toml");
  std::ofstream(file) << "[job]\nname = \"" << name << "\"\nseed = " << seed << "\nrun_dir = \"" << (dir / name).string()
                      << "\"\n[model]\npreset = \"tiny\"\n[data]\npath = \""
                      << (source_dir() / "data/tinyshakespeare/input.txt").string() << "\"\n"
                      << inner << "[outer]\n" << outer
                      << "[[site]]\nname = \"a\"\n" << site_a << "[[site]]\nname = \"b\"\n" << site_b;
  return file;
}

// What the sites of a run that has not ended said last, for the failing check: each one's agent
// output (`<dir>/<name>-<site>.log`), its replicas' logs and its newest events (a hang in CI
// leaves nothing else behind).
inline std::string unended_sites(const std::filesystem::path& dir, const std::string& name) {
  std::string out;
  for (const std::string site : {"a", "b"}) {
    const auto agent_log = dir / (name + "-" + site + ".log");
    const auto site_dir = dir / name / site;
    out += "--- " + agent_log.string() + "\n" + tail_of(agent_log, 2000);
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(site_dir, ec))
      if (entry.path().filename().string().starts_with("replica-"))
        out += "--- " + entry.path().string() + "\n" + tail_of(entry.path(), 2000);
    out += "--- " + (site_dir / "events.jsonl").string() + "\n" + tail_of(site_dir / "events.jsonl", 3000);
  }
  return out;
}

// Runs both sites of `job` to the end; each site's summary (none when they are to fail: `exit_code`).
// `only_a`: overrides for site a alone.
inline std::map<std::string, json> run_sites(const TempDir& dir, const std::filesystem::path& job, const EtcdServer& etcd,
                                      const std::vector<std::string>& only_a = {}, int exit_code = 0) {
  ::setenv("OMP_NUM_THREADS", "1", 1);  // two sites share this machine's cores
  const std::string endpoints = "control.endpoints=[\"" + etcd.endpoint() + "\"]";
  std::vector<std::unique_ptr<ChildProcess>> sites;
  for (const std::string site : {"a", "b"}) {
    std::vector<std::string> argv{MERIDIAN_BIN, "site", "--config", job.string(), "--site", site, "--set", endpoints};
    for (const auto& o : site == "a" ? only_a : std::vector<std::string>{}) argv.insert(argv.end(), {"--set", o});
    sites.push_back(std::make_unique<ChildProcess>(argv, dir / (job.stem().string() + "-" + site + ".log")));
  }
  for (auto& s : sites) {
    const auto status = s->wait_for(std::chrono::seconds(120));
    if (!status) FAIL_CHECK("a site has not ended:\n" << unended_sites(dir.path(), job.stem().string()));
    REQUIRE(status.has_value());
    REQUIRE(*status == exit_code);
  }
  std::map<std::string, json> out;
  if (exit_code != 0) return out;
  for (const std::string site : {"a", "b"})
    out[site] = json::parse(std::ifstream(job.parent_path() / job.stem() / site / "summary.json"));
  return out;
}

// step -> loss, from one site's metrics.
inline std::map<int, double> losses(const std::filesystem::path& metrics) {
  std::map<int, double> out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const auto m = json::parse(line);
    if (m.contains("loss")) out[m["step"].get<int>()] = m["loss"].get<double>();
  }
  return out;
}

// Until replica `id` of `run` has joined a group `count` times: the step it joined at the last of
// them (nullopt when it did not in time).
inline std::optional<int> wait_for_joins(const std::filesystem::path& run, int id, std::size_t count) {
  std::optional<int> step;
  wait_until([&] {
    std::size_t seen = 0;
    for (const auto& e : read_jsonl(run / "events.jsonl"))
      if (e.value("event", "") == "joined" && e.value("replica", -1) == id && ++seen == count)
        step = e["step"].get<int>();
    return seen >= count;
  });
  return step;
}

// Runs both sites of `job` (a of 3 replicas, restarts on), kills site a's replicas `victims` (0:
// its leader) one after the other, the first once a passed step 24, each next one 40 steps on and
// once it has joined a group since it was last killed and trained two rounds there (a group it
// leads, when it is replica 0), and waits for both to end well; each site's summary.
inline std::map<std::string, json> run_killing_a_replica(const TempDir& dir, const std::filesystem::path& job,
                                                         const EtcdServer& etcd,
                                                         const std::vector<int>& victims = {1}) {
  ::setenv("OMP_NUM_THREADS", "1", 1);
  const std::string endpoints = "control.endpoints=[\"" + etcd.endpoint() + "\"]";
  const std::string name = job.stem().string();
  std::vector<std::unique_ptr<ChildProcess>> sites;
  for (const std::string site : {"a", "b"})
    sites.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{MERIDIAN_BIN, "site", "--config", job.string(), "--site", site, "--set", endpoints},
        dir / (name + "-" + site + ".log")));
  const auto run = dir / name;
  for (std::size_t k = 0; k < victims.size(); ++k) {
    REQUIRE(wait_for_step(run / "a", 24 + 40 * static_cast<int>(k)));
    const auto killed_before =
        std::count(victims.begin(), victims.begin() + static_cast<std::ptrdiff_t>(k), victims[k]);
    const auto joined_at = wait_for_joins(run / "a", victims[k], static_cast<std::size_t>(killed_before) + 1);
    REQUIRE(joined_at.has_value());
    REQUIRE(wait_for_step(run / "a", *joined_at + 8));  // two rounds in that group: a leader has led
    const auto found = find_processes({"replica", job.string(), "--site a --id " + std::to_string(victims[k])});
    REQUIRE(found.size() == 1);
    ::kill(found[0], SIGKILL);
  }
  for (auto& s : sites) {
    const auto status = s->wait_for(std::chrono::seconds(240));
    if (!status) FAIL_CHECK("a site has not ended:\n" << unended_sites(dir.path(), name));
    REQUIRE(status.has_value());
    CHECK(*status == 0);
  }
  std::map<std::string, json> out;
  for (const std::string site : {"a", "b"}) out[site] = json::parse(std::ifstream(run / site / "summary.json"));
  return out;
}

// version -> the weights' hash every replica of `site` applied with it; a disagreement fails.
inline std::map<std::int64_t, std::string> commit_hashes(const std::filesystem::path& events, const std::string& site) {
  std::map<std::int64_t, std::string> out;
  for (const auto& e : read_jsonl(events)) {
    if (e.value("event", "") != "commit_applied" || e["site"] != site) continue;
    const auto [it, fresh] = out.emplace(e["version"].get<std::int64_t>(), e["params_hash"].get<std::string>());
    if (!fresh) CHECK(it->second == e["params_hash"].get<std::string>());
  }
  return out;
}


}  // namespace meridian::testing
