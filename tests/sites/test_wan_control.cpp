// The leader's side of operator faults against a real etcd on a fake wall clock: the list is read
// every second and run after the config's, each fault's edges are logged once with its source,
// and a key holding garbage leaves the schedule as it was.
#include <doctest/doctest.h>

#include "core/runlog/run_log.hpp"
#include "sim/emulator/operator_faults.hpp"
#include "sim/emulator/wan_schedule.hpp"
#include "sites/replica/wan_control.hpp"
#include "crosssite/control/etcd_client.hpp"
#include "tests/support/etcd_server.hpp"
#include "tests/support/jsonl.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using namespace meridian::testing;
using Kind = WanFault::Kind;

TEST_CASE("the operator's faults from etcd run after the config's, read every second, their edges are logged") {
  EtcdServer etcd;
  JobConfig c;
  c.job.name = "wan-control";
  c.sites = {{.name = "a"}, {.name = "b"}, {.name = "c"}};
  c.wan.link = {.latency_ms = 10};
  c.wan.faults = {{.kind = Kind::Latency, .sites = {"c"}, .from_s = 5, .to_s = 10, .latency_ms = 5}};
  auto schedule = std::make_shared<WanSchedule>(c);
  schedule->set_start(1000);
  EtcdClient client(EtcdOptions{{etcd.endpoint()}});
  TempDir dir("wan_control");
  RunLog log(dir / "run");
  double now = 1001;
  WanControl control(c, "a", schedule, client, log, [&] { return now; });

  control.tick();  // nothing written yet: the config's faults as they were
  CHECK(schedule->faults() == c.wan.faults);
  const WanFault cut{.kind = Kind::Partition, .sites = {"b"}, .from_s = 3, .to_s = 4};
  client.put(wan_faults_key(c.job.name), encode_faults({cut}));
  now = 1001.5;
  control.tick();  // read a second ago: not yet
  CHECK_FALSE(schedule->partitioned("a", "b", 1003.5));
  now = 1002;
  control.tick();
  CHECK(schedule->faults() == merged_faults(c.wan.faults, {cut}));
  CHECK(schedule->partitioned("a", "b", 1003.5));
  for (const double t : {1003.2, 1003.6, 1004.1, 1005.5}) {
    now = t;
    control.tick();
  }
  client.put(wan_faults_key(c.job.name), "not a list");
  now = 1006.5;
  control.tick();
  CHECK(schedule->faults() == merged_faults(c.wan.faults, {cut}));  // as it was
  const auto figures = control.figures();
  CHECK(figures["start"] == 1000.0);
  CHECK(figures["config"].size() == 1);
  CHECK(figures["operator"] == nlohmann::json::array({to_json(cut)}));

  std::vector<std::string> seen;
  for (const auto& e : read_jsonl(log.dir() / "events.jsonl")) {
    const std::string kind = e["event"];
    if (kind.starts_with("wan_"))
      seen.push_back(kind + (e.contains("source") ? " " + e["source"].get<std::string>() : "") +
                     (e.contains("job_s") ? " " + std::to_string(e["job_s"].get<double>()) : ""));
  }
  const std::vector<std::string> expected = {
      "wan_schedule_changed",         "wan_fault_began operator 3.200000", "wan_fault_ended operator 4.100000",
      "wan_fault_began config 5.500000", "wan_faults_unreadable"};
  CHECK(seen == expected);
}
