// meridianctl against a running site (`meridian site`, 2 replica processes on loopback): every
// command, refusal without the ops token (logged), malformed input on the command line and on
// the socket, and the agent still serving after all of it. Against a job of two sites (real
// etcd): rollback to the site's version, and the refusals of every other rollback.
#include <doctest/doctest.h>
#include <signal.h>

#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "core/checkpoint/store.hpp"
#include "core/io/env.hpp"
#include "core/io/secret_file.hpp"
#include "intrasite/comm/tcp_store.hpp"
#include "tests/sites/run_meridianctl.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/etcd_server.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/jsonl.hpp"
#include "tests/support/run_process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian::testing;
using nlohmann::json;
using meridian::TcpStoreClient;
using meridian::write_secret_file;

namespace {

constexpr const char* kToken = "t0ken-for-tests";

std::filesystem::path write_job(const TempDir& dir) {
  const auto file = dir / "job.toml";
  std::ofstream(file) << "[job]\nname = \"ops\"\nseed = 5\nrun_dir = \"" << (dir / "run").string() << "\"\n"
                      << "[model]\npreset = \"tiny\"\n[data]\npath = \""
                      << (source_dir() / "data/tinyshakespeare/input.txt").string() << "\"\n"
                      << "[inner]\nlr = 3e-3\nbatch_per_replica = 2\nsteps = 100000\n"
                      << "[log]\nevery = 5\neval_every = 0\neval_windows = 4\n"
                      // Only the checkpoints asked for (none is pruned meanwhile), in parts: the replicas
                      // shard AdamW's moments, and a rollback reads each one's own part.
                      << "[checkpoint]\nevery = 0\nkeep = 3\nper_replica = true\n[parallel]\nzero_stage = 1\n"

                      << "[replicas]\ncount = 2\nheartbeat_timeout_ms = 5000\ncollective_timeout_ms = 5000\n";
  return file;
}

struct Ctl {
  std::filesystem::path job;
  std::string site = "local";
  ProcessResult operator()(const std::vector<std::string>& args, const std::string& token = "") const {
    return run_meridianctl(job, site, args, token);
  }
  json status() const {
    const auto r = (*this)({"--json", "status"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
    return json::parse(r.out);
  }
};

// Waits (bounded) until `pred` holds for the site's events.
bool wait_for_event(const std::filesystem::path& run, const std::function<bool(const json&)>& pred) {
  return eventually(
      [&] {
        for (const auto& e : read_jsonl(run / "events.jsonl"))
          if (pred(e)) return true;
        return false;
      },
      std::chrono::seconds(30), std::chrono::milliseconds(20));
}

// How many processes have `text` in their command line, as `ps` shows it to any user.
int processes_showing(const std::string& text) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    const std::string line((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    n += line.find(text) != std::string::npos;
  }
  return n;
}

bool applied(const json& e, const std::string& command) {
  return e.value("event", "") == "ops_applied" && e.value("command", "") == command;
}

json raw_request(const std::string& endpoint, std::vector<std::string> frames) {
  zmq::context_t context{1};
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  socket.connect(endpoint);
  for (std::size_t i = 0; i < frames.size(); ++i)
    socket.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  zmq::pollitem_t items[] = {{socket.handle(), 0, ZMQ_POLLIN, 0}};
  REQUIRE(zmq::poll(items, 1, std::chrono::milliseconds(10000)) > 0);
  zmq::message_t reply;
  (void)socket.recv(reply, zmq::recv_flags::none);
  return json::parse(reply.to_string_view());
}

}  // namespace

TEST_CASE("meridianctl: every command against a running site, refusals, malformed input") {
  TempDir dir("ctl");
  const auto job = write_job(dir);
  const auto run = dir / "run";
  ::setenv("MERIDIAN_OPS_TOKEN", kToken, 1);  // the site takes its token from here
  ChildProcess site({MERIDIAN_BIN, "site", "--config", job.string(), "--site", "local"}, dir / "site.log");
  ::unsetenv("MERIDIAN_OPS_TOKEN");
  REQUIRE(wait_for_step(run, 45));
  const Ctl ctl{job};
  const std::string with_token = kToken;
  const auto token_file = dir / "ops.token", wrong_file = dir / "wrong.token";
  write_secret_file(token_file, kToken);
  write_secret_file(wrong_file, "wrong");

  // status: JSON for scripts, a table for people. The leader publishes its figures every few
  // steps, so they may trail the metrics file a little: ask again (bounded) until they caught up.
  json s;
  eventually(
      [&] {
        s = ctl.status();
        return (s["figures"].is_object() ? s["figures"].value("step", 0) : 0) >= 40;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(50));
  CHECK(s["ok"] == true);
  CHECK(s["site"] == "local");
  CHECK(s["replicas"].size() == 2);
  CHECK(s["members"] == json::array({0, 1}));
  for (const auto& r : s["replicas"]) CHECK(r["heartbeat_age_s"].get<double>() < 5.0);
  CHECK(s["figures"]["step"].get<int>() >= 40);
  CHECK(s["figures"].contains("loss"));
  CHECK_FALSE(s["events"].empty());
  const auto table = ctl({"status"});
  CHECK(table.exit_code == 0);
  CHECK(table.out.find("replica  alive  member  heartbeat_age_s  restarts") != std::string::npos);
  CHECK(table.out.find("last events:") != std::string::npos);

  // Without the token (or with a wrong one) nothing changes, and the attempt is logged.
  for (const auto& args : {std::vector<std::string>{"evict", "1"}, {"set-lr", "0.25"}, {"checkpoint"},
                           {"--token-file", wrong_file.string(), "evict", "1"}}) {
    const auto r = ctl(args);
    CHECK_MESSAGE(r.exit_code == 1, r.describe());
    CHECK(r.err.find("refused") != std::string::npos);
  }
  CHECK(events_of(read_jsonl(run / "events.jsonl"), "ops_refused").size() == 4);
  CHECK(events_of(read_jsonl(run / "events.jsonl"), "replica_evicted").empty());

  // set-lr, checkpoint, rollback: applied by the whole group after a step.
  const auto set_lr = ctl({"set-lr", "0.25"}, with_token);
  CHECK_MESSAGE(set_lr.exit_code == 0, set_lr.describe());
  CHECK(wait_for_event(run, [](const json& e) { return applied(e, "set-lr") && e["scale"] == 0.25; }));
  CHECK(ctl({"checkpoint", "--token-file", token_file.string()}).exit_code == 0);
  CHECK(wait_for_event(run, [](const json& e) { return applied(e, "checkpoint"); }));

  // checkpoints: listed and verified.
  const auto listed = ctl({"--json", "checkpoints"});
  REQUIRE(listed.exit_code == 0);
  const auto checkpoints = json::parse(listed.out)["checkpoints"];
  REQUIRE(checkpoints.size() == 1);
  CHECK(checkpoints[0]["verified"] == true);
  const int rollback_step = checkpoints[0]["step"].get<int>();
  CHECK(ctl({"checkpoints"}).out.find(" ok ") != std::string::npos);
  const auto back = ctl({"rollback", "--to", std::to_string(rollback_step), "--lr-scale", "0.5"}, with_token);
  CHECK_MESSAGE(back.exit_code == 0, back.describe());
  CHECK(wait_for_event(run, [&](const json& e) {
    return applied(e, "rollback") && e["to_step"] == rollback_step && e["scale"] == 0.5 && !e.contains("error");
  }));
  // The leader read its part of the moments (the first of the 2 the file lists), not the whole.
  const auto file = meridian::CheckpointStore(meridian::posix_env(), run / "checkpoints", 3).path_for(rollback_step);
  const auto parts = meridian::decode_checkpoint(meridian::posix_env().read_all(file), file.string())
                         .get_pod<std::uint64_t>("adamw.parts");
  REQUIRE(parts.size() == 5);
  int rollbacks = 0;
  for (const auto& e : events_of(read_jsonl(run / "events.jsonl"), "ops_applied"))
    if (e["command"] == "rollback" && e["to_step"] == rollback_step) {
      ++rollbacks;
      CHECK(e.value("read", "") == "parts");
      CHECK(e.value("moments_elements", std::uint64_t{0}) == parts[2]);
    }
  CHECK(rollbacks == 1);
  const auto no_such = ctl({"rollback", "--to", "/no/such/ckpt.mrdn"}, with_token);
  CHECK(no_such.exit_code == 1);
  CHECK(no_such.err.find("no checkpoint /no/such/ckpt.mrdn") != std::string::npos);
  CHECK(events_of(read_jsonl(run / "events.jsonl"), "ops_command").size() == 3);
  // Versions: a one-site job has none (refused by the agent); a malformed one is bad usage.
  const auto version = ctl({"rollback", "--to", "v3"}, with_token);
  CHECK(version.exit_code == 1);
  CHECK(version.err.find("a one-site job has no versions") != std::string::npos);
  for (const std::string bad : {"v", "v1x", "v-2", "v99999999999999999999"}) {
    const auto r = ctl({"rollback", "--to", bad}, with_token);
    CHECK_MESSAGE(r.exit_code == 2, r.describe());
    CHECK(r.err.find("is no version: expected v<N>") != std::string::npos);
  }

  // evict: the replica is killed, the group regroups, the slot is restarted.
  const auto evicted = ctl({"evict", "1"}, with_token);
  CHECK_MESSAGE(evicted.exit_code == 0, evicted.describe());
  CHECK(wait_for_event(run, [](const json& e) {
    return e.value("event", "") == "replica_evicted" && e["id"] == 1 && e["reason"] == "evicted by the operator";
  }));
  CHECK(wait_for_event(run, [](const json& e) { return e.value("event", "") == "replica_restarted"; }));
  CHECK(ctl({"evict", "7"}, with_token).exit_code == 1);

  // events: all of them, or follow until N arrive.
  const auto all = ctl({"events"});
  CHECK(all.exit_code == 0);
  CHECK(all.out.find("\"event\":\"site_start\"") != std::string::npos);
  const auto followed = ctl({"events", "--follow", "--count", "3"});
  CHECK(followed.exit_code == 0);
  CHECK(std::count(followed.out.begin(), followed.out.end(), '\n') == 3);

  // drain / resume in a one-site job: training stops after the current step, with a checkpoint,
  // and goes on when resumed. Without the token nothing happens (logged); commands that would
  // change nothing, and pausing an outer exchange a one-site job does not have, are refused.
  for (const auto& args : {std::vector<std::string>{"drain"}, {"resume"}, {"pause-outer"}, {"resume-outer"}}) {
    const auto r = ctl(args);
    CHECK_MESSAGE(r.exit_code == 1, r.describe());
    CHECK(r.err.find("refused: " + args[0] + " needs the site's ops token") != std::string::npos);
  }
  CHECK(events_of(read_jsonl(run / "events.jsonl"), "ops_refused").size() == 8);
  const auto pause = ctl({"pause-outer"}, with_token);
  CHECK(pause.exit_code == 1);
  CHECK(pause.err.find("pause-outer: a one-site job has no outer exchange to pause") != std::string::npos);
  CHECK(ctl({"resume"}, with_token).err.find("resume: the site is not drained") != std::string::npos);
  const auto drain = ctl({"drain"}, with_token);
  CHECK_MESSAGE(drain.exit_code == 0, drain.describe());
  REQUIRE(wait_for_event(run, [](const json& e) { return e.value("event", "") == "drained"; }));
  const int drained_step = events_of(read_jsonl(run / "events.jsonl"), "drained").at(0)["step"];
  CHECK(ctl({"drain"}, with_token).err.find("drain: the site is drained already") != std::string::npos);
  auto drained = ctl.status();
  CHECK(drained["mode"]["state"] == "drained");
  CHECK(drained["control"]["etcd"] == false);
  CHECK(ctl({"status"}).out.find("mode drained") != std::string::npos);
  CHECK(wait_for_event(run, [&](const json& e) { return e.value("event", "") == "checkpoint" && e["step"] == drained_step; }));
  const auto logged = read_jsonl(run / "metrics.jsonl").size();  // the drained step's line came before the drain
  for (int i = 0; i < 10; ++i) {  // parked: no step is taken while drained
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(read_jsonl(run / "metrics.jsonl").size() == logged);
  }
  CHECK(ctl({"resume"}, with_token).exit_code == 0);
  CHECK(wait_for_event(run, [&](const json& e) { return e.value("event", "") == "resumed" && e["step"] == drained_step; }));
  CHECK(wait_for_step(run, drained_step + 10));
  CHECK(ctl.status()["mode"]["state"] == "training");

  // Malformed input: usage errors on the command line, error replies on the socket.
  for (const auto& args : {std::vector<std::string>{"drain", "now"}, {"resume", "1"}, {"pause-outer", "--all"},
                           {"resume-outer", "x"}}) {
    const auto r = ctl(args, with_token);
    CHECK_MESSAGE(r.exit_code == 2, r.describe());
    CHECK(!r.err.empty());
  }
  CHECK(ctl({"set-lr", "-1"}).exit_code == 2);
  CHECK(ctl({"reboot"}).exit_code == 2);
  CHECK(ctl({"evict"}).exit_code == 2);
  const std::string endpoint = json::parse(std::ifstream(run / "ops.json"))["endpoint"];
  CHECK(raw_request(endpoint, {"not json"})["error"] == "malformed request: not JSON");
  CHECK(raw_request(endpoint, {R"({"command":"shutdown"})"})["ok"] == false);
  CHECK(raw_request(endpoint, {"a", "b", "c"})["error"] == "malformed request: expected one frame of JSON");
  CHECK(raw_request(endpoint, {std::string(100, '{')})["ok"] == false);
  CHECK(ctl.status()["ok"] == true);  // still serving

  // Around the token: a command filed straight into the site's store, without its secret, is
  // refused and never reaches a replica; the token is on no process's command line; a token
  // file others can read is refused, as is the token given with --set.
  const json started = events_of(read_jsonl(run / "events.jsonl"), "site_start").at(0);
  for (const std::string secret : {"", "guessed"}) {
    TcpStoreClient outsider(started["store"].get<std::string>(), secret, std::chrono::seconds(5));
    const std::string command = R"({"command":"set-lr","scale":0.01})";
    CHECK_THROWS_WITH(outsider.set("ops/cmd/4", std::as_bytes(std::span(command.data(), command.size()))),
                      doctest::Contains("not the site's store secret"));
    CHECK_THROWS_WITH(outsider.add("ops/cmds", 1), doctest::Contains("not the site's store secret"));
  }
  const auto step_now = ctl.status()["figures"].value("step", 0);
  CHECK(wait_for_step(run, step_now + 10));
  for (const auto& e : read_jsonl(run / "events.jsonl")) CHECK_FALSE((applied(e, "set-lr") && e["scale"] == 0.01));
  CHECK(processes_showing(kToken) == 0);
  CHECK(processes_showing("--store") >= 2);  // the two replicas' command lines: the look itself works
  std::filesystem::permissions(token_file, std::filesystem::perms::others_read, std::filesystem::perm_options::add);
  const auto open_file = ctl({"checkpoint", "--token-file", token_file.string()});
  CHECK(open_file.exit_code == 1);  // meridianctl: 1 for whatever failed, the reason on stderr
  CHECK(open_file.err.find("is open to other users (mode 0604)") != std::string::npos);
  const auto on_command_line = run_process({MERIDIAN_BIN, "site", "--config", job.string(), "--site", "local", "--set", "ops.token=abc"}, {});
  CHECK(on_command_line.exit_code == 78);
  CHECK(on_command_line.err.find("a secret does not belong in a job file") != std::string::npos);

  ::kill(site.pid(), SIGTERM);
  CHECK(site.wait_for(std::chrono::seconds(30)).has_value());
  CHECK_FALSE(std::filesystem::exists(run / "ops.json"));
}

TEST_CASE("meridianctl rollback --to vN in a job of two sites: to the site's newest version, every other refused") {
  EtcdServer etcd;
  TempDir dir("ctl-sites");
  const auto job = dir / "job.toml";
  // A version every 200 steps: a command usually reaches the replicas before the next one.
  std::ofstream(job) << "[job]\nname = \"ops2\"\nseed = 5\nrun_dir = \"" << (dir / "run").string() << "\"\n"
                     << "[model]\npreset = \"tiny\"\n[data]\npath = \""
                     << (source_dir() / "data/tinyshakespeare/input.txt").string() << "\"\n"
                     << "[inner]\nlr = 3e-3\nbatch_per_replica = 2\nsteps = 100000\n"
                     << "[log]\nevery = 5\neval_every = 0\neval_windows = 4\n[checkpoint]\nevery = 0\n"
                     << "[outer]\nalgorithm = \"diloco\"\ninner_steps = 200\noverlap = false\n"
                     << "[control]\nendpoints = [\"" << etcd.endpoint() << "\"]\n"
                     << "[[site]]\nname = \"a\"\n[[site]]\nname = \"b\"\n";
  ::setenv("OMP_NUM_THREADS", "1", 1);
  ::setenv("MERIDIAN_OPS_TOKEN", kToken, 1);
  std::vector<std::unique_ptr<ChildProcess>> sites;
  for (const std::string site : {"a", "b"})
    sites.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{MERIDIAN_BIN, "site", "--config", job.string(), "--site", site}, dir / (site + ".log")));
  ::unsetenv("MERIDIAN_OPS_TOKEN");
  const auto run = dir / "run" / "a";
  const Ctl ctl{job, "a"};
  const std::string with_token = kToken;
  REQUIRE(wait_for_step(run, 5));
  // Wait (bounded) until the site shows version 1 or later in its figures.
  std::int64_t held = 0;
  REQUIRE(eventually(
      [&] {
        const auto f = ctl.status()["figures"];
        held = f.is_object() ? f.value("version", std::int64_t{0}) : 0;
        return held >= 1;
      },
      std::chrono::seconds(60), std::chrono::milliseconds(100)));

  // No token: refused and logged.
  const auto refused = ctl({"rollback", "--to", std::string("v").append(std::to_string(held))});
  CHECK(refused.exit_code == 1);
  CHECK(refused.err.find("refused") != std::string::npos);
  CHECK(events_of(read_jsonl(run / "events.jsonl"), "ops_refused").size() == 1);

  // An older version: a job-wide revert, refused by the agent with the reason.
  const auto older = ctl({"rollback", "--to", "v0"}, with_token);
  CHECK(older.exit_code == 1);
  CHECK(older.err.find("would revert the whole job") != std::string::npos);
  // A checkpoint: not across sites.
  const auto checkpoint = ctl({"rollback", "--to", "3"}, with_token);
  CHECK(checkpoint.exit_code == 1);
  CHECK(checkpoint.err.find("goes back to a version, not to a checkpoint") != std::string::npos);
  // Malformed: bad usage, nothing sent.
  CHECK(ctl({"rollback", "--to", "v1.5x"}, with_token).exit_code == 1);  // with a '.': a file, so a checkpoint
  CHECK(ctl({"rollback", "--to", "vX"}, with_token).exit_code == 2);

  // The site's newest version: the replicas roll back to it (a new version may come in between:
  // then the agent or the replicas say which one the site holds, and the operator asks again).
  bool done = false;
  int filed = 0;
  for (int attempt = 0; attempt < 10 && !done; ++attempt) {
    const auto f = ctl.status()["figures"];
    const std::int64_t v = f.value("version", std::int64_t{0});
    const auto r = ctl({"rollback", "--to", std::string("v").append(std::to_string(v)), "--lr-scale", "0.5"}, with_token);
    if (r.exit_code == 1 && r.err.find("this site holds version") != std::string::npos) continue;
    REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
    ++filed;
    json outcome;
    REQUIRE(wait_for_event(run, [&](const json& e) {
      if (!applied(e, "rollback") || e["number"] != filed) return false;
      outcome = e;
      return true;
    }));
    MESSAGE(outcome.dump());
    if (outcome.contains("error")) {
      CHECK(outcome["error"].get<std::string>().find("this site holds version") != std::string::npos);
      continue;
    }
    CHECK(outcome["to_version"] == v);
    CHECK(outcome["scale"] == 0.5);
    done = true;
  }
  CHECK(done);
  CHECK(ctl.status()["ok"] == true);
  for (auto& s : sites) ::kill(s->pid(), SIGTERM);
  for (auto& s : sites) CHECK(s->wait_for(std::chrono::seconds(30)).has_value());
}
