// A site end to end: `meridian site` runs 3 replica processes on loopback. One is killed (-9) or
// stopped (SIGSTOP) mid-run; the others keep training without a restart of the site, the dead
// one is restarted and heals from a peer over the network, and all replicas end bit-identical.
// An injected learning-rate spike is rolled back by all replicas as one, and the site's metrics
// endpoint, scraped mid-run, shows it.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/checkpoint/store.hpp"
#include "core/io/env.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/http_get.hpp"
#include "tests/support/jsonl.hpp"
#include "tests/support/loopback_listener.hpp"
#include "tests/support/prom_parser.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian::testing;
using nlohmann::json;

namespace {

// `timeout_ms` bounds heartbeats and collectives: short where the test waits for it (a hang),
// generous elsewhere so a replica starved by a loaded CI machine is not evicted by mistake.
std::filesystem::path write_job(const TempDir& dir, const std::string& extra, int timeout_ms = 5000,
                                const std::string& log_extra = "") {
  const auto file = dir / "job.toml";
  std::ofstream(file) << "[job]\nname = \"site\"\nseed = 3\nrun_dir = \"" << (dir / "run").string() << "\"\n"
                      << "[model]\npreset = \"tiny\"\n[data]\npath = \""
                      << (source_dir() / "data/tinyshakespeare/input.txt").string() << "\"\n"
                      << "[inner]\nlr = 3e-3\nbatch_per_replica = 2\nsteps = 400\n"
                      << "[log]\nevery = 5\neval_every = 0\neval_windows = 4\n"
                      << log_extra << "[replicas]\ncount = 3\nheartbeat_timeout_ms = " << timeout_ms
                      << "\ncollective_timeout_ms = " << timeout_ms << "\n"
                      << "sdc_every = 25\n"
                      << extra;
  return file;
}

// The params hash of each replica's last replica_done event.
std::map<int, std::string> final_hashes(const std::vector<json>& events) {
  std::map<int, std::string> out;
  for (const auto& e : events_of(events, "replica_done")) out[e["replica"].get<int>()] = e["params_hash"];
  return out;
}

}  // namespace

namespace {

// Kills replica 1 once the site is past step 40, lets the site finish, and checks what every
// such run must show; the events are returned for more.
// Each replica's memory ledger at its end (replica_done): its parts add up, and the trainer holds
// whole weights, the moments of the elements it keeps and the gradients: whole below stage 2, else
// the resident pages of its part's (and the buffer's partial end pages). The elements each keeps.
std::vector<std::size_t> moments_kept(const std::vector<json>& events, int stage = 0) {
  std::vector<std::size_t> out;
  for (const auto& d : events_of(events, "replica_done")) {
    const auto& m = d["memory"];
    const auto params = m["params"].get<std::size_t>(), kept = m["moments_elements"].get<std::size_t>();
    const auto trainer = m["state_bytes"]["trainer"].get<std::size_t>();
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    if (stage < 2) CHECK(trainer == 4 * (2 * params + 2 * kept));
    else if (stage == 2) CHECK(trainer - 4 * (params + 2 * kept) <= 4 * kept + 4 * page);
    // Stage 3: the weights' pages too, but for one where two of the layers' ranges meet.
    else CHECK(trainer <= 16 * kept + 4 * page * 8);
    CHECK(m["state_bytes"]["outer"] == 0);  // a job of one site keeps no outer state
    out.push_back(kept);
    double total = 0;
    for (const auto& [part, bytes] : m["state_bytes"].items()) total += bytes.get<double>();
    CHECK(m["state_bytes_per_param"].get<double>() == doctest::Approx(total / m["params"].get<double>()));
    CHECK(m["peak_rss_bytes"].get<double>() > total);
    CHECK(m["first_join_peak_rss_bytes"].get<double>() > 0);
    CHECK(m["first_join_peak_rss_bytes"].get<double>() <= m["peak_rss_bytes"].get<double>());
  }
  REQUIRE(out.size() == 3);
  return out;
}

std::vector<json> kill_one_replica(const TempDir& dir, const std::string& extra, const std::string& log_extra = "") {
  const auto job = write_job(dir, "restart = true\n" + extra, 5000, log_extra);
  ChildProcess site({MERIDIAN_BIN, "site", "--config", job.string(), "--site", "local"}, dir / "site.log");
  REQUIRE(wait_for_step(dir / "run", 40));
  const auto victims = find_processes({"replica", job.string(), "--id 1"});
  REQUIRE(victims.size() == 1);
  ::kill(victims[0], SIGKILL);
  const auto code = site.wait_for(std::chrono::seconds(240));
  REQUIRE_MESSAGE(code.has_value(), "site did not finish");
  CHECK(*code == 0);

  const auto events = read_jsonl(dir / "run" / "events.jsonl");
  CHECK(events_of(events, "site_start").size() == 1);  // the site itself was never restarted
  const auto exited = events_of(events, "replica_exited");
  REQUIRE_FALSE(exited.empty());
  CHECK(exited[0]["id"] == 1);
  CHECK_FALSE(events_of(events, "replica_restarted").empty());
  // generations: [0,1,2] -> without 1 -> with 1 again
  std::vector<std::vector<int>> gens;
  for (const auto& g : events_of(events, "generation")) gens.push_back(g["members"].get<std::vector<int>>());
  REQUIRE(gens.size() >= 3);
  CHECK(gens[0] == std::vector<int>{0, 1, 2});
  CHECK(gens[1] == std::vector<int>{0, 2});
  CHECK(gens.back() == std::vector<int>{0, 1, 2});
  // the restarted replica received its state over the network
  bool healed = false;
  for (const auto& j : events_of(events, "joined"))
    if (j["replica"] == 1 && j["generation"].get<int>() >= 2 && j["healed"].get<bool>() && j["heal_bytes"] > 0)
      healed = true;
  CHECK(healed);
  const auto hashes = final_hashes(events);
  REQUIRE(hashes.size() == 3);
  CHECK(hashes.at(0) == hashes.at(1));
  CHECK(hashes.at(0) == hashes.at(2));
  // No step is lost or done twice: the leader's loss lines go up by [log] every.
  std::int64_t last = 0;
  for (const auto& m : read_jsonl(dir / "run" / "metrics.jsonl")) {
    if (!m.contains("loss")) continue;
    CHECK(m["step"].get<std::int64_t>() == last + 5);
    last = m["step"].get<std::int64_t>();
  }
  CHECK(last == 400);
  return events;
}

}  // namespace

TEST_CASE("kill -9 of a replica: the site goes on, restarts it, it heals from a peer, all end identical") {
  TempDir dir("site-kill");
  const auto events = kill_one_replica(dir, "", "sample_every = 100\nsample_tokens = 16\n");
  // The leader writes the site's samples, one every 100 steps, whoever died meanwhile.
  const auto samples = events_of(events, "sample");
  REQUIRE(samples.size() == 4);
  for (std::size_t i = 0; i < samples.size(); ++i) {
    CHECK(samples[i]["step"] == 100 * (i + 1));
    CHECK(samples[i]["replica"] == 0);
    CHECK(samples[i]["site"] == "local");
    CHECK(samples[i]["tokens"] == 16);
    CHECK(samples[i]["text"].get<std::string>().size() >= 16);  // a byte a token, U+FFFD 3 bytes
  }
  // Weights, gradients and both moments, whole on every replica: 16 bytes per parameter.
  const auto kept = moments_kept(events);
  for (const auto& d : events_of(events, "replica_done"))
    CHECK(d["memory"]["moments_elements"] == d["memory"]["params"]);
  CHECK(kept[0] == kept[2]);
}

TEST_CASE("ZeRO stages 1 to 3: a replica killed mid-run, the survivors re-cut the optimizer's state (and at 3 the weights) and lose no step") {
  for (const int stage : {1, 2, 3}) {
    CAPTURE(stage);
    TempDir dir("site-kill-zero" + std::to_string(stage));
    // Stage 2's and 3's checkpoints are written in parts, one file per replica beside the leader's,
    // every 20 steps: the replica killed after step 40 restarts from one of them.
    const std::string parts = stage >= 2 ? "every = 20\nper_replica = true\n" : "every = 100\n";
    const auto events =
        kill_one_replica(dir, "[checkpoint]\n" + parts + "[parallel]\nzero_stage = " + std::to_string(stage) + "\n");
    // The survivors' regroup: the dead replica's part of the moments comes from the newest
    // checkpoint (one at step 100 when the kill came that late) or restarts from zero; theirs carry over.
    std::size_t refilled = 0;
    for (const auto& j : events_of(events, "joined"))
      if (j["generation"].get<int>() == 1)
        refilled = j["moments_lost"].get<std::size_t>() + j["moments_from_checkpoint"].get<std::size_t>();
    CHECK(refilled > 0);
    CHECK(events_of(events, "checkpoint").size() >= 4);  // steps 100..400, gathered and written by the leader
    // The last step's periodic checkpoint is the final one: the end does not write it again.
    int at_end = 0;
    for (const auto& c : events_of(events, "checkpoint")) at_end += c["step"] == 400;
    CHECK(at_end == 1);
    // A third of the moments each (and at stage 2 of the gradients): every element's on one replica.
    const auto kept = moments_kept(events, stage);
    // Each checkpoint in a part per member (3 at the end), read back whole. The restarted replica
    // read its third of the moments before it asked to join, while the others trained on.
    if (stage >= 2) {
      const auto resumed = events_of(events, "resumed_parts");
      REQUIRE(resumed.size() == 1);
      CHECK(resumed[0]["replica"] == 1);
      CHECK(resumed[0]["whole"] == false);
      CHECK(resumed[0]["before_join"] == true);
      const json done = events_of(events, "replica_done").front()["memory"];
      CHECK(resumed[0]["moments_elements"].get<double>() < 0.5 * done["params"].get<double>());
      for (const auto& c : events_of(events, "checkpoint")) CHECK(c["parts"].get<int>() >= 2);
      CHECK(events_of(events, "checkpoint").back()["parts"] == 3);
      const auto final_file = dir / "run" / "checkpoints" / "ckpt-0000000400.mrdn";
      CHECK(meridian::read_checkpoint(meridian::posix_env(), final_file).get_pod<float>("adamw.m").size() == kept[0] + kept[1] + kept[2]);
    }
    std::size_t params = 0;
    for (const auto& d : events_of(events, "replica_done")) params = d["memory"]["params"].get<std::size_t>();
    CHECK(kept[0] + kept[1] + kept[2] == params);
  }
}

TEST_CASE("a replica that hangs (SIGSTOP) is evicted after the timeout and the site continues") {
  TempDir dir("site-stop");
  const auto job = write_job(dir, "restart = false\n", 2000);
  ChildProcess site({MERIDIAN_BIN, "site", "--config", job.string(), "--site", "local"}, dir / "site.log");
  REQUIRE(wait_for_step(dir / "run", 40));
  const auto victims = find_processes({"replica", job.string(), "--id 2"});
  REQUIRE(victims.size() == 1);
  ::kill(victims[0], SIGSTOP);
  const auto code = site.wait_for(std::chrono::seconds(240));
  REQUIRE_MESSAGE(code.has_value(), "site did not finish");
  CHECK(*code == 0);
  const auto events = read_jsonl(dir / "run" / "events.jsonl");
  const auto evicted = events_of(events, "replica_evicted");
  REQUIRE_FALSE(evicted.empty());
  CHECK(evicted[0]["id"] == 2);
  std::vector<std::vector<int>> gens;
  for (const auto& g : events_of(events, "generation")) gens.push_back(g["members"].get<std::vector<int>>());
  CHECK(gens.back() == std::vector<int>{0, 1});
  const auto hashes = final_hashes(events);
  REQUIRE(hashes.count(0) == 1);
  REQUIRE(hashes.count(1) == 1);
  CHECK(hashes.at(0) == hashes.at(1));
  CHECK(hashes.count(2) == 0);
}

TEST_CASE("attached replicas (started by a cluster launcher, RANK / MASTER_PORT) train with the agent") {
  TempDir dir("site-attach");
  const auto job = write_job(dir, "restart = false\n");
  const std::string port = std::to_string(fixed_loopback_port());
  ::setenv("WORLD_SIZE", "2", 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", port.c_str(), 1);
  ChildProcess site({MERIDIAN_BIN, "site", "--attach", "--config", job.string(), "--site", "local"}, dir / "site.log");
  std::vector<std::unique_ptr<ChildProcess>> replicas;
  for (int rank = 0; rank < 2; ++rank) {
    ::setenv("RANK", std::to_string(rank).c_str(), 1);
    replicas.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{MERIDIAN_BIN, "replica", "--config", job.string(), "--site", "local"},
        dir / ("replica" + std::to_string(rank) + ".log")));
  }
  for (const char* v : {"WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "RANK"}) ::unsetenv(v);
  INFO("MASTER_PORT=", port, "\nsite.log:\n", tail_of(dir / "site.log"), "\nreplica0.log:\n", tail_of(dir / "replica0.log"));
  for (auto& r : replicas) CHECK(r->wait_for(std::chrono::seconds(120)) == std::optional<int>(0));
  const auto code = site.wait_for(std::chrono::seconds(30));
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  const auto events = read_jsonl(dir / "run" / "events.jsonl");
  const auto hashes = final_hashes(events);
  REQUIRE(hashes.size() == 2);
  CHECK(hashes.at(0) == hashes.at(1));
  CHECK(events_of(events, "replica_started").size() == 2);  // slots the agent waited for, not processes it made
}

TEST_CASE("an injected learning-rate spike: the replicas roll back as one and recover, all end identical") {
  TempDir dir("site-guard");
  // The guard judges the all-reduced loss and gradient norm, so every replica takes the same
  // decision; a replica that did not would fail the parameter-hash comparison every 25 steps.
  const auto job = write_job(dir, "restart = false\n[guard]\nwindow = 20\nmin_history = 10\nsnapshot_every = 10\n"
                                  "inject_lr_step = 104\ninject_lr_factor = 300\n");
  ChildProcess site({MERIDIAN_BIN, "site", "--config", job.string(), "--site", "local"}, dir / "site.log");
  // Mid-run, past the rollback, the site's metrics endpoint shows it (scraped over 127.0.0.1).
  REQUIRE(wait_for_step(dir / "run", 150));
  const auto listening = events_of(read_jsonl(dir / "run" / "events.jsonl"), "metrics_listening");
  REQUIRE(listening.size() == 1);
  const auto scrape = http_get(listening[0]["port"].get<int>(), "/metrics");
  CHECK(scrape.status == 200);
  const auto metrics = parse_prometheus(scrape.body);
  const std::map<std::string, std::string> at = {{"site", "local"}};
  CHECK(metrics.value("meridian_rollbacks_total", at) == 1);
  CHECK(metrics.value("meridian_lr_scale", at) == 0.5);
  CHECK(metrics.value("meridian_goodput", at) < 1.0);  // the 5 steps rolled back were computed for nothing
  CHECK(metrics.value("meridian_step", at) > 105);  // the agent reads the figures every ~100 ms: a few steps behind
  CHECK(metrics.value("meridian_replicas_live", at) == 3);
  CHECK(std::isfinite(metrics.value("meridian_loss", at)));
  CHECK(metrics.value("meridian_tokens_per_second", at) > 0);
  const auto code = site.wait_for(std::chrono::seconds(240));
  REQUIRE_MESSAGE(code.has_value(), "site did not finish");
  CHECK(*code == 0);
  const auto events = read_jsonl(dir / "run" / "events.jsonl");
  const auto rollback = events_of(events, "rollback");
  REQUIRE(rollback.size() == 1);  // the group leader reports for all
  CHECK(rollback[0]["from_step"] == 105);
  CHECK(rollback[0]["to_step"] == 100);
  CHECK(rollback[0]["lr_scale"] == 0.5);
  CHECK(events_of(events, "recovered").size() == 1);
  CHECK(events_of(events, "sdc_detected").empty());
  CHECK(events_of(events, "generation").size() == 1);  // no replica failed or left
  const auto hashes = final_hashes(events);
  REQUIRE(hashes.size() == 3);
  CHECK(hashes.at(0) == hashes.at(1));
  CHECK(hashes.at(0) == hashes.at(2));
}
