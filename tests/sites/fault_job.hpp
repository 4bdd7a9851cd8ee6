#pragma once
// A three-site job as real processes on loopback (`meridian site` per site, each in its own process
// group) against a real etcd, with the hooks a fault test needs: kill -9 or stop a site, start it
// again, watch the commit log in etcd. After the run, check_invariants() reads every site's
// events and the commit log and checks what must hold whatever happened (DESIGN.md, invariants).
#include <doctest/doctest.h>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/emulator/wan_start.hpp"
#include "crosssite/control/etcd_client.hpp"
#include "crosssite/round/records.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/temp_dir.hpp"

namespace meridian::testing {

using nlohmann::json;

inline double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Every line of a JSON-lines file (a run's events or metrics).
inline std::vector<json> read_lines(const std::filesystem::path& file) {
  std::vector<json> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

class FaultJob {
 public:
  static inline const std::vector<std::string> kSites = {"a", "b", "c"};

  // About 12 s on two cores, 16 rounds of ~0.6 s: long enough for a site to die, be missed and come back while
  // the others still train.
  static constexpr int kSteps = 4000;
  static constexpr int kInnerSteps = 250;
  static constexpr int kLeaseTtl = 2;

  struct Shape {
    int steps = kSteps;  // a multiple of kInnerSteps
    int lease_ttl_s = kLeaseTtl;
  };

  // `endpoints`: the etcd every site uses, unless `site_endpoints` names others for a site.
  FaultJob(const std::string& name, std::vector<std::string> endpoints, const std::string& extra_toml = "",
           std::map<std::string, std::vector<std::string>> site_endpoints = {})
      : FaultJob(name, std::move(endpoints), extra_toml, std::move(site_endpoints), Shape{}) {}
  FaultJob(const std::string& name, std::vector<std::string> endpoints, const std::string& extra_toml,
           std::map<std::string, std::vector<std::string>> site_endpoints, Shape shape)
      : dir_(name), name_(name), endpoints_(std::move(endpoints)), site_endpoints_(std::move(site_endpoints)),
        steps_(shape.steps) {
    ::setenv("OMP_NUM_THREADS", "1", 1);  // three sites share this machine's cores
    file_ = dir_ / (name + ".toml");
    std::ofstream(file_) << "[job]\nname = \"" << name << "\"\nseed = 7\nrun_dir = \"" << run_dir().string() << "\"\n"
                         << "[model]\npreset = \"tiny\"\n[data]\npath = \""
                         << (source_dir() / "data/tinyshakespeare/input.txt").string() << "\"\n"
                         << "[inner]\nbatch_per_replica = 2\nsteps = " << steps_ << "\n"
                         << "[log]\nevery = 50\neval_every = 0\neval_windows = 64\n"
                         << "[checkpoint]\nevery = 200\n"
                         << "[outer]\ninner_steps = " << kInnerSteps << "\n"
                         << "[control]\nlease_ttl_s = " << shape.lease_ttl_s << "\nkeepalive_ms = 500\n"
                         << extra_toml << "[[site]]\nname = \"a\"\n[[site]]\nname = \"b\"\n[[site]]\nname = \"c\"\n";
    etcd_ = std::make_unique<EtcdClient>(EtcdOptions{endpoints_, std::chrono::milliseconds(5000)});
  }
  FaultJob(const FaultJob&) = delete;
  FaultJob& operator=(const FaultJob&) = delete;

  int steps() const { return steps_; }
  std::filesystem::path run_dir() const { return dir_ / name_; }
  const std::filesystem::path& file() const { return file_; }
  // More `--set KEY=VALUE` overrides for every site started from now on.
  std::vector<std::string> sets;

  void start_all() {
    for (const auto& s : kSites) start(s);
  }

  void start(const std::string& site) {
    const auto& eps = site_endpoints_.contains(site) ? site_endpoints_.at(site) : endpoints_;
    std::string list = "control.endpoints=[";
    for (std::size_t i = 0; i < eps.size(); ++i) list += (i ? ",\"" : "\"") + eps[i] + "\"";
    list += "]";
    const auto log = dir_ / (site + "-" + std::to_string(++starts_[site]) + ".log");
    std::vector<std::string> argv = {MERIDIAN_BIN, "site", "--config", file_.string(), "--site", site, "--set", list};
    for (const auto& s : sets) argv.insert(argv.end(), {"--set", s});
    procs_[site] = std::make_unique<ChildProcess>(argv, log);
  }

  // The whole site (agent and replicas: one process group), at once; its exit code.
  int kill(const std::string& site, int sig = SIGKILL) {
    signal(site, sig);
    const auto status = procs_.at(site)->wait_for(std::chrono::seconds(10));
    REQUIRE(status.has_value());
    procs_.erase(site);  // not among the sites finish() expects to end well
    return *status;
  }
  bool member(const std::string& site) { return etcd_->get(RoundKeys(name_).member(site)).has_value(); }
  // The job's start (wall-clock seconds) as the sites agreed on it for the emulated WAN; nullopt
  // before the first site wrote it, or in a job without [wan].
  std::optional<double> wan_start() {
    const auto text = etcd_->get(wan_start_key(name_));
    return text ? std::optional<double>(std::stod(*text)) : std::nullopt;
  }
  void signal(const std::string& site, int sig) { ::kill(-procs_.at(site)->pid(), sig); }

  // Waits for every site still running to end; each must end well.
  void finish(std::chrono::seconds limit = std::chrono::seconds(60)) {
    for (const auto& [site, proc] : procs_) {
      const auto status = proc->wait_for(limit);
      CAPTURE(site);
      if (!status) {  // say what it was doing: its last events and its replica's last words
        const auto all = events(site);
        for (std::size_t i = all.size() > 8 ? all.size() - 8 : 0; i < all.size(); ++i) MESSAGE(all[i].dump());
        std::ifstream log(run_dir() / site / "replica-0.log");
        std::string line, last;
        while (std::getline(log, line)) last += line + "\n";
        if (last.size() > 2000) last = last.substr(last.size() - 2000);
        MESSAGE(last);
      }
      REQUIRE(status.has_value());
      CHECK(*status == 0);
    }
  }

  // The newest committed version in etcd, and its record (0 and nullopt before the first).
  std::int64_t newest_version() { return static_cast<std::int64_t>(etcd_->get_prefix(RoundKeys(name_).commits()).size()); }
  CommitRecord commit(std::int64_t version) { return decode_commit(*etcd_->get(RoundKeys(name_).commit(version))); }

  // Polls `done` every 20 ms for up to `limit`.
  template <class F>
  void wait_until(F done, double limit_s, const char* what) {
    const double deadline = wall_seconds() + limit_s;
    while (!done()) {
      if (wall_seconds() > deadline) FAIL("timed out waiting for ", what);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  void wait_version(std::int64_t v, double limit_s = 60) {
    wait_until([&] { return newest_version() >= v; }, limit_s, "a version");
  }

  json summary(const std::string& site) const {
    return json::parse(std::ifstream(run_dir() / site / "summary.json"));
  }
  std::vector<json> events(const std::string& site) const { return read_lines(run_dir() / site / "events.jsonl"); }

  // The invariants, checked from what the run left: the commit log in etcd (versions 1..N, each
  // (site, round) merged at most once, nothing refused merged) and every site's events (within each
  // incarnation versions strictly increase; every site saw the same hash for every version).
  // Returns the commit log.
  std::vector<CommitRecord> check_invariants() {
    std::vector<CommitRecord> log;
    std::set<std::pair<std::string, std::int64_t>> merged;
    for (const auto& [key, value] : etcd_->get_prefix(RoundKeys(name_).commits())) {
      log.push_back(decode_commit(value));
      CHECK(log.back().number == static_cast<std::int64_t>(log.size()));  // no gap, no fork
      for (const auto& e : log.back().entries) {
        CAPTURE(e.site);
        CAPTURE(e.round);
        CHECK(merged.insert({e.site, e.round}).second);  // no delta applied twice
      }
    }
    std::map<std::int64_t, std::string> hash_of;
    for (const auto& site : kSites) {
      CAPTURE(site);
      std::int64_t last = -1;
      for (const auto& e : events(site)) {
        const std::string kind = e["event"];
        if (kind == "link_open") last = -1;  // a new process of this site
        if (kind == "delta_refused") CHECK_FALSE(merged.contains({e["peer"], e["number"]}));
        if (kind != "commit_applied" && kind != "state_adopted") continue;
        const std::int64_t v = e["version"];
        CHECK(v > last);
        last = v;
        const auto [it, fresh] = hash_of.try_emplace(v, e["params_hash"]);
        CHECK(it->second == e["params_hash"].get<std::string>());
        CHECK(std::to_string(log.at(v - 1).params_hash) == it->second);
      }
    }
    return log;
  }

 private:
  TempDir dir_;
  std::string name_;
  std::vector<std::string> endpoints_;
  std::map<std::string, std::vector<std::string>> site_endpoints_;
  int steps_;
  std::filesystem::path file_;
  std::unique_ptr<EtcdClient> etcd_;
  std::map<std::string, std::unique_ptr<ChildProcess>> procs_;
  std::map<std::string, int> starts_;
};

}  // namespace meridian::testing
