// The site agent, driven step by step: a MemoryStore stands in for the site's store, fake processes
// for the replicas (the test plays their part of the protocol) and a variable for the clock. The
// real process launcher is tested on small shell commands.
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "sites/site/agent.hpp"
#include "intrasite/group/protocol.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/eventually.hpp"

using namespace meridian;
using nlohmann::json;

namespace {

// Processes that end when the test says so (or on SIGKILL); records what the agent did to them.
struct FakeLauncher final : Launcher {
  struct Proc {
    bool alive = false;
    int incarnation = 0;
    std::optional<ExitStatus> exit;
  };
  std::map<int, Proc> procs;
  std::vector<std::pair<int, int>> started;  // (id, incarnation)
  std::vector<std::pair<int, int>> signals;  // (id, signal)

  void start(int id, int incarnation) override {
    REQUIRE_FALSE(procs[id].alive);
    procs[id] = Proc{true, incarnation, std::nullopt};
    started.emplace_back(id, incarnation);
  }
  void signal(int id, int sig) override {
    signals.emplace_back(id, sig);
    if (sig == SIGKILL && procs[id].alive) procs[id].exit = ExitStatus{0, SIGKILL, {}};
  }
  std::optional<ExitStatus> poll(int id) override {
    auto& p = procs[id];
    if (!p.alive || !p.exit) return std::nullopt;
    p.alive = false;
    return p.exit;
  }
  void exit(int id, int code) { procs[id].exit = ExitStatus{code, 0, {}}; }
};

SiteAgentOptions opts(int replicas) {
  return SiteAgentOptions{
      .site = "a", .replicas = replicas, .restart = true, .max_restarts = 3, .heartbeat_timeout_s = 10,
      .failure_grace_s = 2};
}

struct Site {
  explicit Site(SiteAgentOptions o) : agent(o, store, procs, log, [this] { return t; }) { agent.start(); }

  // The replicas' side of the protocol.
  void ready(int id) { store.add(site_keys::ready(id), 1); }
  void beat(int id) { store.add(site_keys::heartbeat(id), 1); }
  void fail(std::int64_t gen, int id) { store.add(site_keys::failure(gen, id), 1); }

  std::optional<Generation> published(std::int64_t n) {
    if (!store.check(site_keys::generation(n))) return std::nullopt;
    return decode_generation(store.get(site_keys::generation(n), std::chrono::milliseconds(0)));
  }
  std::vector<json> events(const std::string& kind) {
    std::ifstream in(dir.path() / "events.jsonl");
    std::vector<json> out;
    for (std::string line; std::getline(in, line);) {
      const json e = json::parse(line);
      if (e.at("event") == kind) out.push_back(e);
    }
    return out;
  }
  // Forms the first group of all replicas.
  void form_group(int replicas) {
    for (int i = 0; i < replicas; ++i) ready(i);
    REQUIRE(agent.step() == SiteOutcome::Running);
    REQUIRE(agent.generation().number == 0);
  }

  testing::TempDir dir{"agent"};
  MemoryStore store;
  FakeLauncher procs;
  RunLog log{dir.path()};
  double t = 100;
  SiteAgent agent;
};

// Two replicas a cluster launcher started (the agent starts and kills nothing), their first group formed.
struct AttachedSite {
  AttachedSite() : agent(opts(2), store, procs, log, [this] { return t; }) {
    agent.start();
    for (int id : {0, 1}) {
      store.add(site_keys::ready(id), 1);
      store.add(site_keys::heartbeat(id), 1);
    }
    REQUIRE(agent.step() == SiteOutcome::Running);
    REQUIRE(agent.generation().members == std::vector<int>{0, 1});
  }

  testing::TempDir dir{"agent"};
  MemoryStore store;
  AttachedLauncher procs{store};
  RunLog log{dir.path()};
  double t = 100;
  SiteAgent agent;
};

}  // namespace

TEST_CASE("read_counter: absent, a counter, and garbage") {
  MemoryStore store;
  CHECK_FALSE(read_counter(store, "hb/0").present);
  store.add("hb/0", 5);
  const Counter c = read_counter(store, "hb/0");
  CHECK(c.present);
  CHECK(c.value == 5);
  CHECK(c.problem.empty());
  const std::byte junk[3]{};
  store.set("hb/1", junk);
  CHECK(read_counter(store, "hb/1").problem.find("3 bytes") != std::string::npos);
}

TEST_CASE("options come from [replicas], the failure grace outlasts a collective timeout") {
  JobConfig config;
  config.replicas.count = 4;
  config.replicas.heartbeat_timeout_ms = 3000;
  config.replicas.collective_timeout_ms = 5000;
  const auto o = site_agent_options(config, "east");
  CHECK(o.site == "east");
  CHECK(o.replicas == 4);
  CHECK(o.heartbeat_timeout_s == doctest::Approx(3.0));
  CHECK(o.first_beat_timeout_s == doctest::Approx(9.0));
  CHECK(o.failure_grace_s > 5.0);
}

TEST_CASE("the first generation waits for every replica, then is published in the store") {
  Site s(opts(3));
  CHECK(s.procs.started == std::vector<std::pair<int, int>>{{0, 1}, {1, 1}, {2, 1}});
  CHECK(s.agent.step() == SiteOutcome::Running);
  s.ready(0);
  s.ready(1);
  CHECK(s.agent.step() == SiteOutcome::Running);
  CHECK_FALSE(s.published(0));
  CHECK(s.events("waiting").size() == 1);
  s.ready(2);
  s.agent.step();
  REQUIRE(s.published(0));
  CHECK(*s.published(0) == Generation{0, {0, 1, 2}});
  const auto gens = s.events("generation");
  REQUIRE(gens.size() == 1);
  CHECK(gens[0]["members"] == json::array({0, 1, 2}));
  CHECK(gens[0]["site"] == "a");
  CHECK_FALSE(gens[0].contains("since_cause_ms"));
}

TEST_CASE("an attached replica that announces itself before the agent starts its slot is in the first group") {
  // A cluster launcher starts replicas alongside the agent: one can reach the store first.
  testing::TempDir dir{"agent"};
  MemoryStore store;
  FakeLauncher procs;
  RunLog log{dir.path()};
  store.add(site_keys::ready(0), 1);
  SiteAgent agent(opts(2), store, procs, log, [] { return 100.0; });
  agent.start();
  store.add(site_keys::ready(1), 1);
  REQUIRE(agent.step() == SiteOutcome::Running);
  CHECK(agent.generation().number == 0);
  CHECK(agent.generation().members == std::vector<int>{0, 1});
}

TEST_CASE("an attached replica cut off from the store is evicted, then admitted again when it comes back") {
  // Its host's cable pulled: the agent can neither reach nor kill it. Back, the same process (or
  // one the cluster launcher started again) beats and announces itself, and the group takes it.
  AttachedSite site;
  MemoryStore& store = site.store;
  SiteAgent& agent = site.agent;
  double& t = site.t;
  t = 111;  // replica 1 silent for 11 s
  store.add(site_keys::heartbeat(0), 1);
  agent.step();
  CHECK(agent.generation().members == std::vector<int>{0});
  agent.step();  // the eviction is reported as its end, and the slot is open again
  t = 115;
  store.add(site_keys::heartbeat(0), 1);
  agent.step();
  CHECK(agent.generation().number == 1);  // nothing came back yet
  store.add(site_keys::heartbeat(1), 1);
  store.add(site_keys::ready(1), 1);
  agent.step();
  CHECK(agent.generation().number == 2);
  CHECK(agent.generation().members == std::vector<int>{0, 1});
  std::ifstream in(site.dir.path() / "events.jsonl");
  std::vector<std::string> kinds;
  for (std::string line; std::getline(in, line);) kinds.push_back(json::parse(line).at("event"));
  CHECK(std::count(kinds.begin(), kinds.end(), "replica_evicted") == 1);
  CHECK(std::count(kinds.begin(), kinds.end(), "replica_restarted") == 1);
}

TEST_CASE("an attached replica killed and started again by its launcher joins once its slot is open") {
  // The launcher restarts the process at once: the new one beats and announces itself while the
  // agent still counts the old one as a member (an announcement a member makes as it moves to a
  // newer generation), and it evicts that one only when the failure grace ends. The new process,
  // still unlisted, announces itself again every second (ReplicaGroup::join), and that counts.
  AttachedSite site;
  MemoryStore& store = site.store;
  SiteAgent& agent = site.agent;
  double& t = site.t;
  t = 101;  // replica 0 killed and started again; replica 1's collective with it failed
  store.add(site_keys::heartbeat(0), 1);
  store.add(site_keys::ready(0), 1);
  store.add(site_keys::failure(0, 1), 1);
  agent.step();
  CHECK(agent.generation().number == 0);
  t = 104;  // past the failure grace: no report from 0 (its new process was not in generation 0)
  store.add(site_keys::heartbeat(0), 1);
  store.add(site_keys::heartbeat(1), 1);
  agent.step();
  CHECK(agent.generation().members == std::vector<int>{1});
  agent.step();  // the eviction ends the incarnation, and the slot is open again
  agent.step();
  CHECK(agent.generation().number == 1);  // what a member announced is no joiner's
  store.add(site_keys::ready(0), 1);      // the new process, still unlisted, announces itself again
  agent.step();
  CHECK(agent.generation().number == 2);
  CHECK(agent.generation().members == std::vector<int>{0, 1});
}

TEST_CASE("a hung replica is evicted, restarted, and rejoins once it is ready") {
  Site s(opts(2));
  s.form_group(2);
  s.t = 105;
  s.beat(0);
  s.beat(1);
  s.agent.step();
  s.t = 116;  // replica 1 silent for 11 s, replica 0 beating
  s.beat(0);
  s.agent.step();
  CHECK(s.procs.signals == std::vector<std::pair<int, int>>{{1, SIGKILL}});
  REQUIRE(s.published(1));
  CHECK(s.published(1)->members == std::vector<int>{0});
  const auto evicted = s.events("replica_evicted");
  REQUIRE(evicted.size() == 1);
  CHECK(evicted[0]["id"] == 1);
  CHECK(evicted[0]["silent_for_ms"] == 11000);

  s.agent.step();  // the killed process is reaped and a new one started
  CHECK(s.procs.started.back() == std::pair<int, int>{1, 2});
  CHECK(s.events("replica_exited").at(0)["signal"] == SIGKILL);
  CHECK(s.events("replica_restarted").at(0)["incarnation"] == 2);
  s.agent.step();
  CHECK_FALSE(s.published(2));  // not ready yet
  s.ready(1);
  s.agent.step();
  REQUIRE(s.published(2));
  CHECK(s.published(2)->members == std::vector<int>{0, 1});
}

TEST_CASE("a replica slow to start gets three heartbeat timeouts for its first beat, its restart too") {
  auto o = opts(2);
  o.first_beat_timeout_s = 30;
  Site s(o);
  s.form_group(2);
  s.t = 125;  // neither has beaten yet: both still starting
  s.beat(0);
  s.agent.step();
  CHECK(s.procs.signals.empty());
  s.t = 131;
  s.beat(0);
  s.agent.step();
  CHECK(s.procs.signals == std::vector<std::pair<int, int>>{{1, SIGKILL}});
  const auto evicted = s.events("replica_evicted");
  REQUIRE(evicted.size() == 1);
  CHECK(evicted[0]["reason"] == "no first heartbeat 31000 ms after its start");
  // The restarted process has the same allowance: the beats its predecessor sent are not its own.
  s.beat(1);
  s.agent.step();  // reaped and restarted at t = 131
  CHECK(s.procs.started.back() == std::pair<int, int>{1, 2});
  s.t = 155;
  s.beat(0);
  s.agent.step();
  CHECK(s.procs.signals.size() == 1);
  s.t = 162;
  s.beat(0);
  s.agent.step();
  REQUIRE(s.events("replica_evicted").size() == 2);
  CHECK(s.events("replica_evicted")[1]["reason"] == "no first heartbeat 31000 ms after its start");
}

TEST_CASE("a crashed member is dropped at once and its restarted process joins afresh") {
  Site s(opts(2));
  s.form_group(2);
  s.procs.exit(1, 3);
  s.agent.step();
  REQUIRE(s.published(1));
  CHECK(s.published(1)->members == std::vector<int>{0});
  CHECK(s.events("replica_exited").at(0)["exit_code"] == 3);
  CHECK(s.procs.started.back() == std::pair<int, int>{1, 2});
  s.ready(1);
  s.agent.step();
  REQUIRE(s.published(2));
  CHECK(s.published(2)->members == std::vector<int>{0, 1});
}

TEST_CASE("a member that dies while the group waits for failure reports is not kept by its successor") {
  Site s(opts(3));
  s.form_group(3);
  s.fail(0, 0);
  s.agent.step();
  s.procs.exit(2, 1);  // dies within the grace period; restarted at once
  s.t = 100.5;
  s.agent.step();
  CHECK_FALSE(s.published(1));  // member 1 may still report
  CHECK(s.procs.started.back() == std::pair<int, int>{2, 2});
  s.fail(0, 1);
  s.t = 100.8;
  s.agent.step();
  REQUIRE(s.published(1));
  CHECK(s.published(1)->members == std::vector<int>{0, 1});
  CHECK(s.events("generation").back()["since_cause_ms"] == 800);
  s.ready(2);
  s.agent.step();
  REQUIRE(s.published(2));
  CHECK(s.published(2)->members == std::vector<int>{0, 1, 2});
}

TEST_CASE("after a failed collective a member that never reports is evicted when the grace ends") {
  Site s(opts(3));
  s.form_group(3);
  s.fail(0, 0);
  s.fail(0, 1);
  s.agent.step();
  s.t = 102.5;
  for (int i = 0; i < 3; ++i) s.beat(i);
  s.agent.step();
  CHECK(s.procs.signals == std::vector<std::pair<int, int>>{{2, SIGKILL}});
  REQUIRE(s.published(1));
  CHECK(s.published(1)->members == std::vector<int>{0, 1});
  CHECK(s.events("failure_reported").size() == 2);
  CHECK(s.events("replica_evicted").at(0)["reason"].get<std::string>().find("failure report") != std::string::npos);
}

TEST_CASE("when every member died, the restarted replicas form a new group") {
  Site s(opts(2));
  s.form_group(2);
  s.procs.exit(0, 1);
  s.procs.exit(1, 1);
  s.agent.step();
  CHECK_FALSE(s.published(1));  // nobody left to form a group with
  CHECK(s.procs.started.size() == 4);
  s.ready(0);
  s.ready(1);
  s.agent.step();
  REQUIRE(s.published(1));
  CHECK(s.published(1)->members == std::vector<int>{0, 1});
}

TEST_CASE("restarts are bounded, when no replica can run the site fails") {
  auto o = opts(1);
  o.max_restarts = 1;
  Site s(o);
  s.procs.exit(0, 1);
  CHECK(s.agent.step() == SiteOutcome::Running);
  CHECK(s.procs.started.size() == 2);
  s.procs.exit(0, 2);
  CHECK(s.agent.step() == SiteOutcome::Failed);
  CHECK(s.agent.failure().find("replica 0 ended with exit code 2 after 1 restart(s)") != std::string::npos);
  CHECK(s.events("site_failed").size() == 1);

  auto off = opts(1);
  off.restart = false;
  Site t(off);
  t.procs.exit(0, 1);
  CHECK(t.agent.step() == SiteOutcome::Failed);
  CHECK(t.procs.started.size() == 1);
}

TEST_CASE("a replica whose input is at fault is not restarted: the site fails at once, naming the cause") {
  Site s(opts(2));
  s.form_group(2);
  s.procs.procs[0].exit = ExitStatus{65, 0, "meridian: data error: data file /x does not exist"};
  CHECK(s.agent.step() == SiteOutcome::Running);  // replica 1 still trains
  CHECK(s.procs.started.size() == 2);             // and replica 0 stays down
  const auto exited = s.events("replica_exited");
  REQUIRE(exited.size() == 1);
  CHECK(exited[0]["permanent"] == true);
  CHECK(exited[0]["cause"] == "meridian: data error: data file /x does not exist");

  s.procs.procs[1].exit = ExitStatus{65, 0, "meridian: data error: data file /x does not exist"};
  CHECK(s.agent.step() == SiteOutcome::Failed);
  CHECK(s.procs.started.size() == 2);
  CHECK(s.agent.permanent_failure() == ErrorKind::Data);
  INFO(s.agent.failure());
  CHECK(s.agent.failure().find("exit code 65 (data error) after 0 restart(s) (meridian: data error: data file /x "
                               "does not exist)") != std::string::npos);

  // A crash is no fault of the input: restarted as before, and no permanent kind.
  Site t(opts(1));
  t.procs.procs[0].exit = ExitStatus{0, 9, ""};
  CHECK(t.agent.step() == SiteOutcome::Running);
  CHECK(t.procs.started.size() == 2);
  CHECK_FALSE(t.agent.permanent_failure());
}

TEST_CASE("the site is done when its replicas finish, a finished replica re-forms nothing") {
  Site s(opts(2));
  s.form_group(2);
  s.procs.exit(0, 0);
  CHECK(s.agent.step() == SiteOutcome::Running);
  CHECK_FALSE(s.published(1));
  CHECK(s.procs.started.size() == 2);
  s.procs.exit(1, 0);
  CHECK(s.agent.step() == SiteOutcome::Done);
  const auto done = s.events("site_done");
  REQUIRE(done.size() == 1);
  CHECK(done[0]["finished"] == json::array({0, 1}));
}

TEST_CASE("garbage in a replica's counter evicts that replica, not the agent") {
  Site s(opts(2));
  s.form_group(2);
  const std::byte junk[5]{};
  s.store.set(site_keys::heartbeat(1), junk);
  CHECK(s.agent.step() == SiteOutcome::Running);
  CHECK(s.procs.signals == std::vector<std::pair<int, int>>{{1, SIGKILL}});
  CHECK(s.events("replica_misbehaved").size() == 1);
  CHECK(read_counter(s.store, site_keys::heartbeat(1)).problem.empty());  // usable by the next incarnation
  REQUIRE(s.published(1));
  CHECK(s.published(1)->members == std::vector<int>{0});
}

namespace {

std::optional<ExitStatus> wait_for(ProcessLauncher& launcher, int id) {
  std::optional<ExitStatus> status;
  testing::eventually([&] { return (status = launcher.poll(id)).has_value(); }, std::chrono::seconds(5));
  return status;
}

}  // namespace

TEST_CASE("ProcessLauncher: output goes to the slot's log, exit codes and signals come back") {
  testing::TempDir dir("launcher");
  std::map<int, std::vector<std::string>> argv = {
      {0, {"/bin/sh", "-c", "echo 'meridian: peer error: earlier'; echo to-out; echo 'meridian: data error: bad' >&2; "
           "echo to-err >&2; exit 65"}},
      {1, {"/bin/sleep", "30"}},
      {2, {"/nonexistent/program"}},
  };
  ProcessLauncher launcher([&](int id) { return argv.at(id); }, dir.path());
  for (int id = 0; id < 3; ++id) launcher.start(id, 1);
  const auto exited = wait_for(launcher, 0);
  REQUIRE(exited);
  CHECK(exited->code == 65);
  CHECK(describe(*exited) == "exit code 65 (data error)");
  CHECK(exited->cause == "meridian: data error: bad");  // its last error line, not an earlier one
  std::ifstream log(dir.path() / "replica-0.log");
  std::stringstream text;
  text << log.rdbuf();
  CHECK(text.str().find("incarnation 1") != std::string::npos);
  CHECK(text.str().find("to-out") != std::string::npos);
  CHECK(text.str().find("to-err") != std::string::npos);

  CHECK_FALSE(launcher.poll(1));
  launcher.signal(1, SIGKILL);
  const auto killed = wait_for(launcher, 1);
  REQUIRE(killed);
  CHECK(killed->signal == SIGKILL);

  const auto missing = wait_for(launcher, 2);
  REQUIRE(missing);
  CHECK(missing->code == 127);
  CHECK_FALSE(launcher.any_running());
}
