// The operator's drain / resume and pause-outer / resume-outer (sites/replica/site_mode): the mode
// transitions as a pure function of the commands, and a real 2-site job on loopback (a `meridian
// site` per site, site b with 2 replicas, a real etcd) steered with meridianctl: status shows the
// etcd member, its leader and b's lease; while b's outer exchange is paused it announces no delta
// and proposes no commit but follows a's versions, and after resume-outer one delta spanning the
// pause is announced and merged; while b is drained it is no member, a commits versions without it,
// and after resume b ends on the same version and weights as a. Every new command is refused
// without the token (and logged), malformed forms exit 2 and the agent keeps answering. A drained
// site whose peers finish the job ends too, cleanly.
#include <doctest/doctest.h>

#include <signal.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "sites/replica/site_mode.hpp"
#include "intrasite/comm/store.hpp"
#include "intrasite/group/protocol.hpp"
#include "crosssite/control/etcd_client.hpp"
#include "crosssite/round/records.hpp"
#include "tests/sites/run_meridianctl.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/etcd_server.hpp"
#include "tests/support/jsonl.hpp"
#include "tests/support/run_process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/eventually.hpp"

using namespace meridian;
using namespace meridian::testing;
using nlohmann::json;

TEST_CASE("site mode: what each command does, and what it refuses") {
  MemoryStore store;
  SiteMode mode(store);
  const auto run = [&](const std::string& kind) {
    json result;
    mode.command(kind, result);
    return result.value("error", std::string());
  };
  CHECK(run("resume") == "not drained");
  CHECK(run("resume-outer") == "the outer exchange is not paused");
  CHECK(run("pause-outer").empty());
  CHECK(mode.outer_paused());
  CHECK(run("pause-outer") == "the outer exchange is paused already");
  CHECK(run("drain").empty());
  CHECK(mode.state() == SiteMode::State::Draining);
  CHECK(run("drain") == "already drained or draining");
  CHECK(run("resume").empty());  // before the drain took effect: cancelled
  CHECK(mode.state() == SiteMode::State::Training);
  CHECK_FALSE(mode.resume_wanted());
  CHECK(run("drain").empty());
  mode.drained(true, {{"step", 40}});
  CHECK(mode.state() == SiteMode::State::Drained);
  const auto bytes = store.get(site_keys::ops_mode(), std::chrono::milliseconds(0));
  const auto published = json::parse(reinterpret_cast<const char*>(bytes.data()),
                                     reinterpret_cast<const char*>(bytes.data()) + bytes.size());
  CHECK(published == json{{"state", "drained"}, {"outer_paused", true}, {"step", 40}});
  CHECK(run("resume").empty());
  CHECK(mode.resume_wanted());
  mode.resumed(true, json::object());
  CHECK(mode.state() == SiteMode::State::Training);
  CHECK(run("resume-outer").empty());
  CHECK_FALSE(mode.outer_paused());
  CHECK(run("reboot") == "not a mode command");
}

namespace {

constexpr const char* kToken = "mode-t0ken";
constexpr int kInnerSteps = 100;
// Long enough for the steering below on a loaded 2-core machine (it needs ~1300 steps of b's). While
// b's outer exchange is paused nothing holds a back: on an idle machine of this kind a ran ~2,700
// steps in those ~2 s and, at 3,000, ended before b resumed, leaving b's spanning round unmerged.
constexpr int kSteps = 6000;

// A 2-site job (a: 1 replica, b: 2) on a real etcd, each site a `meridian site` process.
class TwoSites {
 public:
  // `etcd`'s TLS files, when it has them, are the sites' and this test's own client's. `sites`: the
  // sites started now (start() starts the others).
  TwoSites(const std::string& name, const EtcdServer& etcd, int steps, const std::vector<std::string>& sites = {"a", "b"})
      : dir_(name), name_(name), steps_(steps) {
    const std::string endpoint = etcd.endpoint();
    std::string tls;
    if (etcd.tls())
      tls = "ca_file = \"" + etcd.tls()->ca_file.string() + "\"\ncert_file = \"" + etcd.tls()->cert_file.string() +
            "\"\nkey_file = \"" + etcd.tls()->key_file.string() + "\"\n";
    ::setenv("OMP_NUM_THREADS", "1", 1);  // three replicas share this machine's cores
    file_ = dir_ / "job.toml";
    std::ofstream(file_) << "[job]\nname = \"" << name << "\"\nseed = 7\nrun_dir = \"" << run_dir().string() << "\"\n"
                         << "[model]\npreset = \"tiny\"\n[data]\npath = \""
                         << (source_dir() / "data/tinyshakespeare/input.txt").string() << "\"\n"
                         << "[inner]\nbatch_per_replica = 2\nsteps = " << steps << "\n"
                         << "[log]\nevery = 50\neval_every = 0\neval_windows = 16\n[checkpoint]\nevery = 0\n"
                         << "[outer]\ninner_steps = " << kInnerSteps << "\n"
                         << "[control]\nendpoints = [\"" << endpoint << "\"]\nlease_ttl_s = 2\nkeepalive_ms = 500\n" << tls
                         << "[replicas]\nheartbeat_timeout_ms = 5000\ncollective_timeout_ms = 5000\n"
                         << "[[site]]\nname = \"a\"\nreplicas = 1\n[[site]]\nname = \"b\"\nreplicas = 2\n";
    EtcdOptions options{{endpoint}, std::chrono::milliseconds(5000)};
    options.tls = etcd.tls();
    etcd_ = std::make_unique<EtcdClient>(options);
    for (const auto& site : sites) start(site);
  }

  void start(const std::string& site) {
    ::setenv("MERIDIAN_OPS_TOKEN", kToken, 1);  // the sites take their token from here
    procs_[site] = std::make_unique<ChildProcess>(
        std::vector<std::string>{MERIDIAN_BIN, "site", "--config", file_.string(), "--site", site}, dir_ / (site + ".log"));
    ::unsetenv("MERIDIAN_OPS_TOKEN");
  }

  std::filesystem::path run_dir() const { return dir_ / name_; }
  std::vector<json> events(const std::string& site) const { return read_jsonl(run_dir() / site / "events.jsonl"); }
  json summary(const std::string& site) const { return json::parse(std::ifstream(run_dir() / site / "summary.json")); }

  ProcessResult ctl(const std::string& site, const std::vector<std::string>& args, bool token = false) const {
    return run_meridianctl(file_, site, args, token ? kToken : "");
  }
  json status(const std::string& site) const {
    const auto r = ctl(site, {"--json", "status"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
    return json::parse(r.out);
  }

  // The control plane as the test reads it.
  std::int64_t newest_version() { return static_cast<std::int64_t>(etcd_->get_prefix(RoundKeys(name_).commits()).size()); }
  std::vector<CommitRecord> commits() {
    std::vector<CommitRecord> out;
    for (const auto& [key, value] : etcd_->get_prefix(RoundKeys(name_).commits())) out.push_back(decode_commit(value));
    return out;
  }
  std::vector<DeltaAnnouncement> announced(const std::string& site) {
    std::vector<DeltaAnnouncement> out;
    const RoundKeys keys(name_);
    for (const auto& [key, value] : etcd_->get_prefix(keys.deltas() + site + "/"))
      if (!RoundKeys::is_vouch(key) && !RoundKeys::is_dispute(key)) out.push_back(decode_announcement(value));
    return out;
  }
  bool member(const std::string& site) { return etcd_->get(RoundKeys(name_).member(site)).has_value(); }
  // What the site's membership record says of its outer exchange; nullopt while it is no member.
  std::optional<bool> member_paused(const std::string& site) {
    const auto record = etcd_->get(RoundKeys(name_).member(site));
    return record ? std::optional<bool>(decode_member(*record).paused) : std::nullopt;
  }

  // Polls `done` every 20 ms for up to `limit_s`.
  bool wait_until(const std::function<bool()>& done, double limit_s = 60) {
    return testing::eventually(done, std::chrono::milliseconds(static_cast<std::int64_t>(limit_s * 1000)),
                               std::chrono::milliseconds(20));
  }
  std::optional<json> event(const std::string& site, const std::function<bool(const json&)>& pred) const {
    for (const auto& e : events(site))
      if (pred(e)) return e;
    return std::nullopt;
  }
  json wait_event(const std::string& site, const std::function<bool(const json&)>& pred) {
    std::optional<json> found;
    REQUIRE(wait_until([&] { return (found = event(site, pred)).has_value(); }));
    return *found;
  }

  // Both sites end on their own, well.
  void finish() {
    for (const auto& [site, proc] : procs_) {
      CAPTURE(site);
      const auto status = proc->wait_for(std::chrono::seconds(200));
      REQUIRE(status.has_value());
      CHECK(*status == 0);
    }
  }

 private:
  TempDir dir_;
  std::string name_;
  int steps_;
  std::filesystem::path file_;
  std::unique_ptr<EtcdClient> etcd_;
  std::map<std::string, std::unique_ptr<ChildProcess>> procs_;
};

bool is(const json& e, const std::string& kind) { return e.value("event", "") == kind; }
bool applied(const json& e, const std::string& command) {
  return is(e, "ops_applied") && e.value("command", "") == command && !e.contains("error");
}

}  // namespace

TEST_CASE("a 2-site job: etcd in status, pause-outer / resume-outer, drain / resume, refusals, malformed input") {
  EtcdServer etcd(/*tls=*/true);  // status reads etcd's health over the sites' mutual TLS
  TwoSites job("mode", etcd, kSteps);
  REQUIRE(job.wait_until([&] { return job.newest_version() >= 2; }));

  // status: the etcd member, its leader, b's lease (once b's leader published its figures).
  json s;
  REQUIRE(job.wait_until([&] {
    s = job.status("b");
    return s["control"].contains("lease") && s["control"]["lease"].is_object();
  }));
  const auto& control = s["control"];
  CHECK(control["etcd"] == true);
  REQUIRE(control["members"].size() == 1);
  CHECK(control["members"][0]["reachable"] == true);
  CHECK(control["members"][0]["leader"] == true);
  CHECK(control["members"][0]["client_urls"][0] == etcd.endpoint());
  CHECK(control["leader"] == control["members"][0]["name"]);
  CHECK(control["lease"]["alive"] == true);
  CHECK(control["lease"]["granted_ttl_s"] == 2);
  CHECK(control["lease"]["ttl_s"].get<int>() <= 2);
  CHECK(s["mode"]["state"] == "training");
  const auto table = job.ctl("b", {"status"});
  CHECK(table.out.find("control plane: etcd, leader ") != std::string::npos);
  CHECK(table.out.find(" s left of 2 s") != std::string::npos);

  // Refused without the token, and logged; malformed forms are usage errors; the agent still answers.
  for (const char* command : {"drain", "resume", "pause-outer", "resume-outer"}) {
    const auto r = job.ctl("b", {command});
    CHECK_MESSAGE(r.exit_code == 1, r.describe());
    CHECK(r.err.find(std::string("refused: ") + command + " needs the site's ops token") != std::string::npos);
  }
  CHECK(events_of(job.events("b"), "ops_refused").size() == 4);
  for (const auto& args : {std::vector<std::string>{"drain", "b"}, {"pause-outer", "10"}, {"resume", "--now"}}) {
    const auto r = job.ctl("b", args, true);
    CHECK_MESSAGE(r.exit_code == 2, r.describe());
    CHECK(r.err.find("not expected") != std::string::npos);
  }
  CHECK(job.ctl("b", {"resume-outer"}, true).err.find("the outer exchange is not paused") != std::string::npos);
  CHECK(job.status("b")["ok"] == true);

  // pause-outer: b trains on and follows a's versions, but announces nothing and proposes nothing.
  REQUIRE(job.ctl("b", {"pause-outer"}, true).exit_code == 0);
  const auto paused = job.wait_event("b", [](const json& e) { return applied(e, "pause-outer"); });
  const auto before_pause = job.announced("b");
  // b's membership record says it is paused, so a's commits stop waiting for b's rounds.
  REQUIRE(job.wait_until([&] { return job.member_paused("b") == true; }));
  const std::int64_t v_paused = job.newest_version();
  REQUIRE(job.wait_until([&] { return job.newest_version() >= v_paused + 3; }));
  // a no longer waits for b, and may commit rounds it had queued at once: the pause lasts two of
  // b's rounds too, so the delta after it spans them.
  REQUIRE(job.wait_until([&] { return job.status("b")["figures"]["step"] >= paused["step"].get<std::int64_t>() + 2 * kInnerSteps; }));
  CHECK(job.announced("b").size() == before_pause.size());
  for (const auto& c : job.commits())
    if (c.number > v_paused + 1) CHECK(c.proposer == "a");  // the one after the pause may have been on its way
  CHECK(job.event("b", [&](const json& e) { return is(e, "commit_applied") && e["version"] > v_paused + 1; }));
  CHECK(job.status("b")["mode"]["outer_paused"] == true);
  // resume-outer: the next round's end sends one delta spanning the paused rounds, merged as usual.
  REQUIRE(job.ctl("b", {"resume-outer"}, true).exit_code == 0);
  REQUIRE(job.wait_until([&] { return job.announced("b").size() == before_pause.size() + 1; }));
  CHECK(job.wait_until([&] { return job.member_paused("b") == false; }));  // its rounds are waited for again
  const auto spanning = job.announced("b").back();
  const auto step_paused = paused["step"].get<std::int64_t>();
  const auto resumed_outer = job.wait_event("b", [](const json& e) { return applied(e, "resume-outer"); });
  MESSAGE("b paused its outer exchange at step ", step_paused, " and resumed it at step ", resumed_outer["step"],
          "; the delta after it carries ", spanning.tokens, " tokens (one round: ", before_pause.back().tokens, ") and spans ",
          spanning.rounds, " rounds");
  CHECK(spanning.tokens >= 2 * before_pause.back().tokens);
  CHECK(spanning.rounds >= 2);  // the peers' norm screen allows for as many rounds
  REQUIRE(job.wait_until([&] {
    for (const auto& c : job.commits())
      for (const auto& e : c.entries)
        if (e.site == "b" && e.round == spanning.round) return true;
    return false;
  }));

  // drain: b's round is merged, then it leaves; a commits alone; b follows nothing meanwhile.
  const auto drain = job.ctl("b", {"drain"}, true);
  CHECK_MESSAGE(drain.exit_code == 0, drain.describe());
  const auto drained = job.wait_event("b", [](const json& e) { return is(e, "drained"); });
  CHECK_FALSE(job.member("b"));
  const auto announced_drained = job.announced("b").size();
  const std::int64_t v_drained = job.newest_version();
  const auto ds = job.status("b");
  CHECK(ds["mode"]["state"] == "drained");
  CHECK(ds["control"]["lease"].is_null());
  CHECK(job.ctl("b", {"status"}).out.find("lease: none") != std::string::npos);
  CHECK(job.ctl("b", {"drain"}, true).err.find("drained already") != std::string::npos);
  REQUIRE(job.wait_until([&] { return job.newest_version() >= v_drained + 3; }));
  for (const auto& c : job.commits())
    if (c.number > v_drained)
      for (const auto& e : c.entries) CHECK(e.site == "a");
  CHECK(job.announced("b").size() == announced_drained);
  CHECK_FALSE(job.event("b", [&](const json& e) {
    return (is(e, "commit_applied") || is(e, "state_adopted")) && e["version"] > drained["version"];
  }));
  // resume: b registers again, catches up and trains on with the job.
  REQUIRE(job.ctl("b", {"resume"}, true).exit_code == 0);
  const auto resumed = job.wait_event("b", [](const json& e) { return is(e, "resumed"); });
  MESSAGE("b drained at version ", drained["version"], " (step ", drained["step"], ") for ", resumed["drained_s"],
          " s; resumed at version ", resumed["version"], " (step ", resumed["step"], ")");
  CHECK(resumed["version"] >= v_drained + 3);
  CHECK(job.member("b"));
  CHECK(job.status("b")["mode"]["state"] == "training");

  job.finish();
  const auto sa = job.summary("a"), sb = job.summary("b");
  MESSAGE("versions a committed by the deadline (without b's delta): ", sa["commits_by_deadline"], " of ",
          sa["commits_won"], " it won");
  CHECK(sa["version"] == sb["version"]);
  CHECK(sa["params_hash"] == sb["params_hash"]);
  CHECK(sb["steps"] == kSteps);
  // One hash per version, whichever site applied it.
  std::map<std::int64_t, std::string> hash_of;
  for (const char* site : {"a", "b"})
    for (const auto& e : job.events(site))
      if (is(e, "commit_applied") || is(e, "state_adopted")) {
        const auto [it, fresh] = hash_of.try_emplace(e["version"], e["params_hash"]);
        CHECK(it->second == e["params_hash"].get<std::string>());
      }
  CHECK(events_of(job.events("b"), "ops_command").size() == 4);
}

TEST_CASE("a drained site ends cleanly when the other sites finish the job") {
  EtcdServer etcd;
  // b drains after version 1 (100 steps): a trains the rest alone.
  TwoSites job("drain-end", etcd, 1000);
  REQUIRE(job.wait_until([&] { return job.newest_version() >= 1; }));
  REQUIRE(job.ctl("b", {"drain"}, true).exit_code == 0);
  job.wait_event("b", [](const json& e) { return is(e, "drained"); });
  job.finish();  // a trains to the end alone; b sees it leave and ends too
  CHECK(job.event("b", [](const json& e) { return is(e, "drain_job_over"); }));
  CHECK(job.event("b", [](const json& e) { return is(e, "replica_done"); }));
  CHECK(job.summary("a")["steps"] == 1000);
}

TEST_CASE("status says what a site waits for: here its peer, not started yet") {
  EtcdServer etcd;
  TwoSites job("waiting", etcd, 200, {"a"});
  json waiting;
  REQUIRE(job.wait_until([&] {
    const auto r = job.ctl("a", {"--json", "status"});  // fails until a's agent is up
    if (r.exit_code != 0) return false;
    waiting = json::parse(r.out)["figures"].value("waiting", json::object());
    return waiting.value("s", 0.0) >= 2.0;  // said again as the wait goes on
  }));
  CHECK(waiting["for"] == "sites to join: b");
  const auto table = job.ctl("a", {"status"});
  CHECK_MESSAGE(table.out.find("s for sites to join: b") != std::string::npos, table.out);
  job.start("b");
  REQUIRE(job.wait_until([&] { return job.newest_version() >= 1; }));
  // The join's wait is over; a may wait for the next version by now (under load it often does).
  CHECK(job.status("a")["figures"].value("waiting", json::object()).value("for", "") != "sites to join: b");
  job.finish();
}
