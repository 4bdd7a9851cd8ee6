// The `wan` reply as a pure function of (job, site, the leader's figures, now): measured figures
// with ages, the configured link as it runs now, every fault with its times and whether it holds.
// Adding and clearing faults against a real etcd: two operators at once lose nothing (compare and
// swap), and the refusals that need no running job. A running job: test_meridianctl_wan.
#include <doctest/doctest.h>

#include <set>
#include <thread>

#include "core/runlog/run_log.hpp"
#include "sim/emulator/wan_start.hpp"
#include "sites/site/ops_wan.hpp"
#include "crosssite/control/etcd_client.hpp"
#include "tests/support/etcd_server.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using nlohmann::json;
using Kind = WanFault::Kind;

namespace {

JobConfig job() {
  JobConfig c;
  c.sites = {{.name = "a"}, {.name = "b"}, {.name = "c"}};
  c.wan.link = {.latency_ms = 20, .jitter_ms = 1, .bandwidth_mbps = 100};
  c.wan.faults = {{.kind = Kind::Latency, .sites = {"c"}, .from_s = 10, .to_s = 20, .latency_ms = 5}};
  return c;
}

const json* peer(const json& reply, const std::string& site) {
  for (const auto& p : reply["peers"])
    if (p["site"] == site) return &p;
  return nullptr;
}

}  // namespace

TEST_CASE("before the leader published anything: the peers and the config's faults, no times") {
  const auto r = wan_report(job(), "a", json::object(), 1000);
  CHECK(r["ok"] == true);
  CHECK(r["emulated"] == true);
  CHECK_FALSE(r.contains("start"));
  REQUIRE(r["peers"].size() == 2);
  CHECK(peer(r, "a") == nullptr);
  CHECK(peer(r, "b")->at("measured").empty());
  CHECK(peer(r, "b")->at("configured")["latency_ms"] == 20);
  CHECK(peer(r, "b")->at("fault_now") == false);
  REQUIRE(r["faults"].size() == 1);
  CHECK(r["faults"][0]["source"] == "config");
  CHECK_FALSE(r["faults"][0].contains("holds"));
}

TEST_CASE("measured figures with ages, faults holding now change the configured link and are marked") {
  const json leader = {
      {"links", {{"b", {{"rtt_ms", 41.5}, {"rtt_ms_min", 40.2}, {"rtt_ms_samples", 7}, {"rtt_ms_at", 1012.0}}}}},
      {"wan_faults",
       {{"start", 1000.0},
        {"config", json::array()},
        {"operator", json::array({{{"kind", "partition"}, {"sites", {"b"}}, {"from_s", 14}, {"to_s", 30}}})}}}};
  const auto r = wan_report(job(), "a", leader, 1015);
  CHECK(r["job_s"] == 15.0);
  const auto& b = *peer(r, "b");
  CHECK(b["measured"]["rtt_ms"] == 41.5);
  CHECK(b["measured"]["rtt_ms_samples"] == 7);
  CHECK(b["measured"]["rtt_ms_age_s"] == 3.0);
  CHECK_FALSE(b["measured"].contains("rtt_ms_at"));
  CHECK(b["partitioned"] == true);
  CHECK(b["fault_now"] == true);
  const auto& c = *peer(r, "c");  // the config's latency fault on c holds at 15 s
  CHECK(c["partitioned"] == false);
  CHECK(c["fault_now"] == true);
  CHECK(c["configured"]["latency_ms"] == 25);
  REQUIRE(r["faults"].size() == 2);
  CHECK(r["faults"][1]["source"] == "operator");
  CHECK(r["faults"][1]["from_wall"] == 1014.0);
  CHECK(r["faults"][1]["to_wall"] == 1030.0);
  CHECK(r["faults"][1]["holds"] == true);
  CHECK(wan_report(job(), "a", leader, 1031)["faults"][1]["holds"] == false);
  CHECK(peer(wan_report(job(), "a", leader, 1031), "b")->at("fault_now") == false);
}

TEST_CASE("a job without [wan]: measured figures only, garbage in the figures is left out, not fatal") {
  JobConfig plain = job();
  plain.wan = {};
  const json leader = {{"links", {{"b", {{"rtt_ms", "fast"}, {"in_mbps", 80.0}}}}}, {"wan_faults", 3}};
  const auto r = wan_report(plain, "a", leader, 5);
  CHECK(r["emulated"] == false);
  const auto& b = *peer(r, "b");
  CHECK_FALSE(b.contains("configured"));
  CHECK_FALSE(b["measured"].contains("rtt_ms"));
  CHECK(b["measured"]["in_mbps"] == 80.0);
  CHECK(r["faults"].empty());
}

TEST_CASE("two operators adding faults at once through two sites' agents: compare-and-swap keeps every one") {
  testing::EtcdServer etcd;
  JobConfig c = job();
  c.job.name = "two-operators";
  c.control.endpoints = {etcd.endpoint()};
  const auto wall = [] { return 1000.0; };  // 100 s into the job
  testing::TempDir dir("ops_wan");
  RunLog log_a(dir / "a"), log_b(dir / "b");
  OpsWan a(c, "a", log_a, wall), b(c, "b", log_b, wall);
  CHECK(a.add_fault({"latency", {"b"}, "+0", "+5", {}, 1.0})["error"].get<std::string>().find("not started yet") !=
        std::string::npos);
  EtcdClient client(EtcdOptions{{etcd.endpoint()}});
  client.put(wan_start_key(c.job.name), "900");
  constexpr int kEach = 8;
  const auto add = [](OpsWan& ops, int first) {
    for (int i = first; i < first + kEach; ++i) {
      const auto reply = ops.add_fault({"bandwidth", {"a"}, "+1", "+60", double(i), {}});
      CHECK_MESSAGE(reply["ok"] == true, reply.dump());
    }
  };
  std::thread other(add, std::ref(b), 1 + kEach);
  add(a, 1);
  other.join();
  const auto faults = decode_faults(*client.get(wan_faults_key(c.job.name)), "test");
  REQUIRE(faults.size() == 2 * kEach);
  std::set<double> rates;
  for (const auto& f : faults) {
    CHECK(f.from_s == 101);
    CHECK(f.to_s == 160);
    rates.insert(f.bandwidth_mbps);
  }
  CHECK(rates.size() == 2 * kEach);
  const auto cleared = a.clear_faults();
  CHECK(cleared["removed"] == 2 * kEach);
  CHECK(decode_faults(*client.get(wan_faults_key(c.job.name)), "test").empty());
  JobConfig plain = c;
  plain.wan = {};
  RunLog log_p(dir / "p");
  CHECK(OpsWan(plain, "a", log_p, wall).clear_faults()["error"].get<std::string>().find("no [wan] emulation") !=
        std::string::npos);
}
