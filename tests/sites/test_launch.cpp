// `meridian launch` end to end: a 2-site job on this machine with a local etcd member, run to the
// end (DiLoCo and synchronous), and stopped with Ctrl-C mid-run leaving no process behind.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/util/error.hpp"
#include "sites/launch/etcd_member.hpp"
#include "sites/launch/launcher.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/eventually.hpp"

using namespace meridian::testing;
using meridian::EtcdMember;
using nlohmann::json;

namespace {

std::filesystem::path write_job(const TempDir& dir, int steps) {
  const auto file = dir / "job.toml";
  std::ofstream(file) << "[job]\nname = \"launch\"\nseed = 3\nrun_dir = \"" << (dir / "run").string() << "\"\n"
                      << "[model]\npreset = \"tiny\"\n[data]\npath = \""
                      << (source_dir() / "data/tinyshakespeare/input.txt").string() << "\"\n"
                      << "[inner]\nlr = 3e-3\nbatch_per_replica = 2\nsteps = " << steps << "\n"
                      << "[log]\nevery = 5\neval_every = 0\neval_windows = 4\n"
                      << "[checkpoint]\nevery = 0\n"
                      << "[outer]\ninner_steps = 5\ncodec = \"int8\"\n"
                      << "[[site]]\nname = \"a\"\nreplicas = 1\n"
                      << "[[site]]\nname = \"b\"\nreplicas = 1\n";
  return file;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<json> read_jsonl(const std::filesystem::path& p) {
  std::vector<json> out;
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line, nullptr, false);
    if (!j.is_discarded()) out.push_back(j);
  }
  return out;
}

// Everything a failing case needs to be diagnosed: the launcher's output and each site's log.
std::string logs(const TempDir& dir) {
  std::string out = "--- launch output:\n" + slurp(dir / "launch.log");
  for (const char* site : {"a", "b"})
    out += std::string("--- site ") + site + ":\n" + slurp(dir / "run" / site / "site.log");
  return out;
}

// Runs `meridian launch` to the end and returns the job's summary.json (null if it failed).
json launch_to_end(const TempDir& dir, const std::vector<std::string>& extra) {
  const auto job = write_job(dir, 20);
  std::vector<std::string> argv = {MERIDIAN_BIN, "launch", job.string()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  ChildProcess launch(argv, dir / "launch.log");
  const auto code = launch.wait_for(std::chrono::seconds(120));
  INFO(logs(dir));
  REQUIRE_MESSAGE(code.has_value(), "launch did not finish within 120 s");
  REQUIRE(*code == 0);
  const auto summary = json::parse(slurp(dir / "run" / "summary.json"), nullptr, false);
  REQUIRE(summary.is_object());
  return summary;
}

std::set<std::string> sites_in(const std::vector<json>& lines) {
  std::set<std::string> out;
  for (const auto& l : lines) out.insert(l.value("site", ""));
  return out;
}

}  // namespace

TEST_CASE("launch runs a 2-site DiLoCo job with a local etcd and merges what the sites leave") {
  TempDir dir("launch-diloco");
  const json summary = launch_to_end(dir, {});
  INFO(summary.dump(2));
  CHECK(summary["job"] == "launch");
  CHECK(summary["algorithm"] == "diloco");
  REQUIRE(summary["sites"].size() == 2);
  CHECK(summary["sites"][0]["site"] == "a");
  CHECK(summary["sites"][1]["site"] == "b");
  for (const auto& s : summary["sites"]) {
    CHECK(s["rounds"] == 4);  // 20 steps / H = 5
    CHECK(s["version"] == 4);
  }
  CHECK(summary["same_final_weights"] == true);
  CHECK(summary["wan_bytes_sent"].get<double>() > 0);
  CHECK(summary["reduction_vs_sync"].get<double>() > 1);
  const auto metrics = read_jsonl(dir / "run" / "metrics.jsonl");
  CHECK(sites_in(metrics) == std::set<std::string>{"a", "b"});
  for (std::size_t i = 1; i < metrics.size(); ++i) CHECK(metrics[i - 1]["time"] <= metrics[i]["time"]);
  for (const auto& m : metrics)
    if (m.contains("loss")) CHECK(m.value("grad_norm", 0.0) > 0);  // before clipping, as a single-site run logs it
  const auto events = read_jsonl(dir / "run" / "events.jsonl");
  CHECK(sites_in(events) == std::set<std::string>{"a", "b"});
  // The job lists no keys: its links still speak CURVE, with keys made for the run.
  int curve_links = 0;
  for (const auto& e : events)
    if (e.value("event", "") == "link_open") curve_links += e["address"].get<std::string>().find(";curve=") != std::string::npos;
  CHECK(curve_links >= 2);
  for (const char* site : {"a", "b"}) {
    struct stat st{};
    REQUIRE(::stat((dir / "run" / "keys" / site / "link.key").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
  }
  // And its etcd spoke mutual TLS, with certificates made for the run, the key its owner's alone.
  const auto launched = json::parse(slurp(dir / "run" / "launch.json"), nullptr, false);
  CHECK(launched["endpoints"][0].get<std::string>().starts_with("https://127.0.0.1:"));
  // With etcd's auth on: each site ran as a user of its own (a password apiece), root's kept aside.
  for (const char* secret : {"etcd.key", "a.password", "b.password", "root.password"}) {
    struct stat st{};
    REQUIRE(::stat((dir / "run" / "tls" / secret).c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
  }
  CHECK(slurp(dir / "run" / "tls" / "a.password") != slurp(dir / "run" / "tls" / "b.password"));
}

TEST_CASE("launch with outer.algorithm = sync: a round per step, fp32 gradients on the wire") {
  TempDir dir("launch-sync");
  const json summary = launch_to_end(dir, {"--set", "outer.algorithm=\"sync\""});
  INFO(summary.dump(2));
  CHECK(summary["algorithm"] == "sync");
  REQUIRE(summary["sites"].size() == 2);
  for (const auto& s : summary["sites"]) {
    CHECK(s["rounds"] == 20);
    const double bpr = s["bytes_per_param_round"].get<double>();
    CHECK(bpr > 3.9);
    CHECK(bpr < 4.5);
  }
  CHECK(summary["same_final_weights"] == true);
}

TEST_CASE("Ctrl-C to launch stops every site and etcd: exit 130, nothing left running") {
  TempDir dir("launch-sigint");
  const auto job = write_job(dir, 100000);
  ChildProcess launch({MERIDIAN_BIN, "launch", job.string()}, dir / "launch.log");
  const bool training = eventually(
      [&] {
        for (const char* site : {"a", "b"})
          if (!read_jsonl(dir / "run" / site / "metrics.jsonl").empty()) return true;
        return false;
      },
      std::chrono::seconds(60), std::chrono::milliseconds(20));
  INFO(logs(dir));
  REQUIRE_MESSAGE(training, "no metrics line within 60 s");
  const auto pids = json::parse(slurp(dir / "run" / "launch.json"), nullptr, false);
  REQUIRE(pids.is_object());
  ::kill(launch.pid(), SIGINT);
  const auto code = launch.wait_for(std::chrono::seconds(15));
  REQUIRE_MESSAGE(code.has_value(), "launch did not stop within 15 s of SIGINT");
  CHECK(*code == 130);
  std::vector<int> children = {pids["etcd"].get<int>()};
  for (const auto& [name, pid] : pids["sites"].items()) children.push_back(pid.get<int>());
  CHECK(children.size() == 3);
  for (int pid : children) {
    INFO("pid ", pid);
    CHECK(::kill(pid, 0) == -1);
    CHECK(errno == ESRCH);
  }
  // The replicas, started by the sites: none may train on alone.
  CHECK(find_processes({job.string()}).empty());
}

TEST_CASE("kill -9 of a site under launch: the launcher restarts it, the job finishes, events say so") {
  TempDir dir("launch-restart");
  // Rounds of 250 tiny steps: long enough for site b to die, come back and rejoin while a trains.
  const auto job = write_job(dir, 3000);
  ChildProcess launch({MERIDIAN_BIN, "launch", job.string(), "--set", "outer.inner_steps=250", "--set",
                       "launch.restart_backoff_ms=200", "--set", "control.lease_ttl_s=2", "--set",
                       "control.keepalive_ms=500", "--set", "log.every=50"},
                      dir / "launch.log");
  // Killed once it has trained past the first commit: it must rejoin from its peer.
  const bool committed = eventually(
      [&] {
        for (const auto& m : read_jsonl(dir / "run" / "b" / "metrics.jsonl"))
          if (m.value("version", 0) >= 1) return true;
        return false;
      },
      std::chrono::seconds(60), std::chrono::milliseconds(20));
  INFO(logs(dir));
  REQUIRE_MESSAGE(committed, "site b saw no commit within 60 s");
  const auto before = json::parse(slurp(dir / "run" / "launch.json"), nullptr, false);
  REQUIRE(before.is_object());
  const int victim = before["sites"]["b"].get<int>();
  REQUIRE(::kill(victim, SIGKILL) == 0);
  const auto code = launch.wait_for(std::chrono::seconds(120));
  REQUIRE_MESSAGE(code.has_value(), "launch did not finish within 120 s of the kill");
  CHECK(*code == 0);
  const auto summary = json::parse(slurp(dir / "run" / "summary.json"), nullptr, false);
  REQUIRE(summary.is_object());
  CHECK(summary["same_final_weights"] == true);
  const auto after = json::parse(slurp(dir / "run" / "launch.json"), nullptr, false);
  CHECK(after["sites"]["b"].get<int>() != victim);  // launch.json names the live process
  std::vector<json> failed, restarted;
  for (const auto& e : read_jsonl(dir / "run" / "events.jsonl")) {
    if (e.value("event", "") == "site_failed") failed.push_back(e);
    if (e.value("event", "") == "site_restarted") restarted.push_back(e);
  }
  REQUIRE(failed.size() == 1);
  CHECK(failed[0]["site"] == "b");
  CHECK(failed[0]["exit"] == "signal 9 (Killed)");
  CHECK(failed[0]["restart"] == true);
  REQUIRE(restarted.size() == 1);
  CHECK(restarted[0]["site"] == "b");
  CHECK(restarted[0]["restart"] == 1);
  const std::string out = slurp(dir / "launch.log");
  CHECK(out.find("site b failed (signal 9 (Killed)); restarting it in 0.2 s") != std::string::npos);
  CHECK(out.find("site b restarted") != std::string::npos);
}

TEST_CASE(
    "launch: bad data stops it at once with the cause on the terminal, a checkpoint of another model is not "
    "restarted") {
  TempDir dir("launch-permanent");
  // Caught before anything starts.
  const auto job = write_job(dir, 20);
  ChildProcess missing({MERIDIAN_BIN, "launch", job.string(), "--set", "data.path=\"nope.txt\""}, dir / "missing.log");
  const auto missing_code = missing.wait_for(std::chrono::seconds(30));
  REQUIRE(missing_code.has_value());
  const std::string missing_out = slurp(dir / "missing.log");
  INFO(missing_out);
  CHECK(*missing_code == 65);
  CHECK(missing_out.find("meridian: data error: data file ") != std::string::npos);
  CHECK(missing_out.find("nope.txt\" does not exist") != std::string::npos);
  CHECK(!std::filesystem::exists(dir / "run" / "a"));

  // Found by a replica at start-up: the sites exit with its code and the launcher stops at once.
  launch_to_end(dir, {"--set", "checkpoint.every=10"});
  ChildProcess other({MERIDIAN_BIN, "launch", job.string(), "--set", "model.n_layer=3", "--set", "inner.steps=40"},
                     dir / "other.log");
  const auto other_code = other.wait_for(std::chrono::seconds(60));
  REQUIRE_MESSAGE(other_code.has_value(), "launch did not stop within 60 s");
  const std::string out = slurp(dir / "other.log");
  INFO(out);
  CHECK(*other_code == 66);
  CHECK(out.find("says its input is at fault") != std::string::npos);
  CHECK(out.find("meridian: checkpoint error: ") != std::string::npos);
  CHECK(out.find("restarting it") == std::string::npos);
  for (const char* site : {"a", "b"}) {
    const std::string log = slurp(dir / "run" / site / "replica-0.log");
    INFO(log);
    // One incarnation: the agent did not restart the replica either.
    CHECK(log.find("incarnation 2") == std::string::npos);
  }
}

TEST_CASE("the local etcd member: fresh data dir, healthy, and gone once stopped") {
  TempDir dir("launch-etcd");
  std::filesystem::create_directories(dir / "etcd");
  std::ofstream(dir / "etcd" / "stale") << "from an earlier launch";
  pid_t pid = 0;
  {
    EtcdMember etcd(dir.path());
    pid = etcd.pid();
    const int port = std::stoi(etcd.endpoint().substr(etcd.endpoint().rfind(':') + 1));
    CHECK(meridian::loopback_http_get(port, "/health", std::chrono::seconds(1)).find("\"health\":\"true\"") !=
          std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir / "etcd" / "stale"));
    CHECK(std::filesystem::exists(dir / "etcd.log"));
  }
  CHECK(::kill(pid, 0) == -1);
}

TEST_CASE("an etcd that does not start is an Io error naming its log") {
  TempDir dir("launch-etcd-bad");
  try {
    EtcdMember etcd(dir.path(), std::nullopt, "/bin/false");
    FAIL("started");
  } catch (const meridian::Error& e) {
    CHECK(e.kind() == meridian::ErrorKind::Io);
    CHECK(std::string(e.what()).find((dir / "etcd.log").string()) != std::string::npos);
  }
}

TEST_CASE("merged files are ordered by time and name their site, and the job summary figures") {
  TempDir dir("launch-merge");
  std::ofstream(dir / "a.jsonl") << "{\"site\":\"a\",\"time\":1.0}\n{\"event\":\"checkpoint\",\"time\":3.0}\n{\"time\":";
  std::ofstream(dir / "b.jsonl") << "{\"site\":\"b\",\"time\":2.0}\n";
  const auto merged = meridian::merge_jsonl_by_time({{"a", dir / "a.jsonl"}, {"b", dir / "b.jsonl"}});
  CHECK(merged == "{\"site\":\"a\",\"time\":1.0}\n{\"site\":\"b\",\"time\":2.0}\n"
                  "{\"event\":\"checkpoint\",\"site\":\"a\",\"time\":3.0}\n");

  meridian::JobConfig config;
  config.job.name = "j";
  const std::vector<json> sites = {
      {{"site", "a"}, {"final_val_loss", 2.0}, {"params", 100}, {"steps", 10}, {"wan_bytes_sent", 400},
       {"bytes_per_param_round", 1.0}, {"params_hash", "7"}},
      {{"site", "b"}, {"final_val_loss", 2.5}, {"params", 100}, {"steps", 10}, {"wan_bytes_sent", 600},
       {"bytes_per_param_round", 2.0}, {"params_hash", "7"}}};
  const json s = meridian::job_summary(config, sites, 1.5);
  CHECK(s["final_val_loss"].get<double>() == doctest::Approx(2.25));
  CHECK(s["max_val_loss_spread"].get<double>() == doctest::Approx(0.5));
  CHECK(s["same_final_weights"] == true);
  CHECK(s["wan_bytes_sent"] == 1000);
  CHECK(s["bytes_per_param_round"].get<double>() == doctest::Approx(1.5));
  CHECK(s["sync_bytes_equivalent"] == 4 * 100 * 10 * 2 * 1);
  CHECK(s["reduction_vs_sync"].get<double>() == doctest::Approx(8.0));
  auto other = sites;
  other[1]["params_hash"] = "8";
  CHECK(meridian::job_summary(config, other, 1.5)["same_final_weights"] == false);
}
