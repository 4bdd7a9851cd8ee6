// `meridianctl wan` against a running three-site job with an emulated WAN (fault_job.hpp, real
// etcd): per-peer measured figures that see the emulated latency; refusals (no token, malformed or
// impossible faults); an operator partition added through one site's agent, which every site's
// leader reads from etcd before it begins and honours (transfers dropped on both sides, logged
// where it began and ended), while the job keeps its invariants.
#include <doctest/doctest.h>

#include <cmath>
#include <optional>

#include "sim/emulator/wan_start.hpp"
#include "tests/sites/fault_job.hpp"
#include "tests/sites/run_meridianctl.hpp"
#include "tests/support/etcd_server.hpp"
#include "tests/support/http_get.hpp"
#include "tests/support/prom_parser.hpp"
#include "tests/support/run_process.hpp"

using namespace meridian;
using namespace meridian::testing;

namespace {

constexpr const char* kToken = "wan-t0ken";
constexpr double kLatencyMs = 10;

struct Ctl {
  const FaultJob& job;
  ProcessResult operator()(const std::string& site, const std::vector<std::string>& args, bool with_token = false) const {
    return run_meridianctl(job.file(), site, args, with_token ? kToken : "");
  }
  json wan(const std::string& site) const {
    const auto r = (*this)(site, {"--json", "wan"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
    return json::parse(r.out);
  }
};

const json& peer(const json& wan, const std::string& site) {
  for (const auto& p : wan["peers"])
    if (p["site"] == site) return p;
  FAIL("no peer ", site, " in ", wan.dump());
  throw;
}

}  // namespace

TEST_CASE("meridianctl wan: measured links, refusals, and an operator partition honoured by both sides") {
  EtcdServer etcd;
  // Every link 10 ms one way at 100 Mbit/s. The agents take their token from the environment they
  // start in, so that meridianctl (which would read [ops] token from the job file) has it only when given.
  FaultJob job("wanctl", {etcd.endpoint()},
               "[wan]\nlatency_ms = " + std::to_string(kLatencyMs) + "\nbandwidth_mbps = 100.0\n");
  // ~18 s unloaded on this kind of machine (9 s at 6,000 steps, which ended inside the partition):
  // the partition below, over ~10 s after the start, must end while all train.
  job.sets = {"inner.steps=12000"};
  const Ctl ctl{job};
  ::setenv("MERIDIAN_OPS_TOKEN", kToken, 1);
  job.start_all();
  ::unsetenv("MERIDIAN_OPS_TOKEN");
  double start = 0;
  job.wait_until([&] { return (start = job.wan_start().value_or(0)) > 0; }, 60, "the job's start in etcd");

  // Measured: a's leader probed b and received b's deltas; the round trip carries the emulated
  // latency both ways (a measurement, not the configured figure: it can only be longer).
  json wan;
  job.wait_until(
      [&] {
        wan = ctl.wan("a");
        const auto& m = peer(wan, "b")["measured"];
        return m.contains("rtt_ms") && m.contains("in_mbps") && m.contains("out_mbps");
      },
      60, "measured figures for a <-> b");
  const auto& m = peer(wan, "b")["measured"];
  MESSAGE("a <-> b measured: ", m.dump());
  CHECK(m["rtt_ms_min"].get<double>() >= 2 * kLatencyMs - 0.5);
  CHECK(m["rtt_ms_samples"].get<int>() >= 1);
  CHECK(m["in_mbps"].get<double>() > 0);
  CHECK(m["in_mbps"].get<double>() <= 100 * 1.05);  // never faster than the emulated link (5%: clock reads)
  CHECK(m["in_mbps_age_s"].get<double>() >= 0);
  CHECK(peer(wan, "b")["configured"]["latency_ms"] == kLatencyMs);
  CHECK(peer(wan, "b")["fault_now"] == false);
  const auto table = ctl("a", {"wan"});
  REQUIRE_MESSAGE(table.exit_code == 0, table.describe());
  MESSAGE("meridianctl wan at a:\n", table.out);
  CHECK(table.out.find("rtt_ms") != std::string::npos);
  CHECK(table.out.find("10.0 ms") != std::string::npos);
  // The same figures on a's /metrics, in seconds, once its leader published them.
  int port = 0;
  for (const auto& e : job.events("a"))
    if (e["event"] == "metrics_listening") port = e["port"];
  REQUIRE(port > 0);
  std::optional<double> scraped_rtt;
  job.wait_until(
      [&] {
        const auto scrape = http_get(port, "/metrics");
        const auto metrics = parse_prometheus(scrape.body);
        if (scrape.status == 200 && metrics.has("meridian_wan_rtt_seconds"))
          scraped_rtt = metrics.value("meridian_wan_rtt_seconds", {{"site", "a"}, {"peer", "b"}});
        return scraped_rtt.has_value();
      },
      30, "a's measured round trip to b on /metrics");
  CHECK(*scraped_rtt >= 2 * kLatencyMs / 1000 - 0.0005);

  // Refusals: no token (logged), malformed input (exit 2, said on stderr), impossible faults (exit 1).
  struct Refused {
    std::string kind, sites, from, to;
    bool token;
    int exit_code;
    std::string says;
  };
  const Refused refusals[] = {
      {"partition", "c", "+4", "+8", false, 1, "needs the site's ops token"},
      {"slow", "c", "+4", "+8", true, 2, "--kind"},
      {"partition", "c", "soon", "+8", true, 2, "--from: expected seconds"},
      {"partition", "c,,b", "+4", "+8", true, 2, "--sites: expected site names"},
      {"partition", "x", "+4", "+8", true, 1, "\"x\" is not a site of the job"},
      {"partition", "c", "+8", "+4", true, 1, "must be after from"},
      {"partition", "c", "+1", "+4", true, 1, "at least 3 s from now"},
  };
  for (const auto& no : refusals) {
    CAPTURE(no.kind + " " + no.sites + " " + no.from + " " + no.to);
    const auto r = ctl("a", {"wan", "add-fault", "--kind", no.kind, "--sites", no.sites, "--from", no.from, "--to", no.to},
                       no.token);
    CHECK(r.exit_code == no.exit_code);
    CHECK_MESSAGE(r.err.find(no.says) != std::string::npos, r.err);
  }
  const auto pair_partition = ctl("a", {"wan", "add-fault", "--kind", "partition", "--sites", "b,c", "--pair", "--from",
                                       "+4", "--to", "+8"}, true);
  CHECK(pair_partition.exit_code == 1);
  CHECK_MESSAGE(pair_partition.err.find("pair: a partition cuts") != std::string::npos, pair_partition.err);
  bool refusal_logged = false;
  for (const auto& e : job.events("a")) refusal_logged = refusal_logged || e["event"] == "ops_refused";
  CHECK(refusal_logged);

  // A fault that has not begun goes with clear-faults, asked of another site's agent. This one
  // slows only the a <-> b link (--pair).
  auto slow = ctl("b", {"--json", "wan", "add-fault", "--kind", "bandwidth", "--sites", "a,b", "--pair", "--from", "+300",
                        "--to", "+400", "--bandwidth-mbps", "5"}, true);
  REQUIRE_MESSAGE(slow.exit_code == 0, slow.describe());
  CHECK(json::parse(slow.out)["fault"]["pair"] == true);
  CHECK(ctl("c", {"wan", "clear-faults"}).exit_code == 1);  // no token
  const auto cleared = ctl("c", {"--json", "wan", "clear-faults"}, true);
  REQUIRE_MESSAGE(cleared.exit_code == 0, cleared.describe());
  CHECK(json::parse(cleared.out)["removed"] == 1);

  // The partition, through a's agent: c is cut off from a and b.
  const auto r = ctl("a", {"--json", "wan", "add-fault", "--kind", "partition", "--sites", "c", "--from", "+3.5", "--to", "+6.5"}, true);
  REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
  const auto added = json::parse(r.out);
  const double from_wall = added["from_wall"], to_wall = added["to_wall"];
  CHECK(to_wall - from_wall == doctest::Approx(3));
  CHECK(from_wall >= wall_clock_s() + 1);  // +3.5 from when the agent took it (3 s at least)
  // Every site's leader read it before it began (the lead time), and its agent shows it.
  for (const auto& site : FaultJob::kSites) {
    CAPTURE(site);
    job.wait_until(
        [&] {
          for (const auto& e : job.events(site))
            if (e["event"] == "wan_schedule_changed")
              for (const auto& f : e["operator_faults"])
                if (f["kind"] == "partition") return true;
          return false;
        },
        from_wall - wall_clock_s(), "the leader reading the operator's fault before it begins");
  }
  job.wait_until([&] { return wall_clock_s() > from_wall + 1; }, 30, "the partition");
  const auto during = ctl.wan("b");
  CHECK(peer(during, "c")["partitioned"] == true);
  CHECK(peer(during, "a")["partitioned"] == false);
  const auto status = ctl("c", {"status"});
  CHECK(status.out.find("wan fault (operator)") != std::string::npos);
  job.wait_until([&] { return wall_clock_s() > to_wall + 0.5; }, 30, "the partition's end");
  // A bound, not a wait: the 12,000 steps take ~18 s on an idle machine and over 70 s beside a
  // compile and the suite at -j3, which a 60 s bound failed on.
  job.finish(std::chrono::seconds(240));
  job.check_invariants();

  // Where it began and ended: every leader noticed both edges in its pumps, close to the schedule.
  for (const auto& site : FaultJob::kSites) {
    CAPTURE(site);
    std::optional<double> began, ended;
    for (const auto& e : job.events(site)) {
      if (e["event"] == "wan_fault_began" && e["source"] == "operator") began = e["time"].get<double>();
      if (e["event"] == "wan_fault_ended" && e["source"] == "operator") ended = e["time"].get<double>();
    }
    REQUIRE(began.has_value());
    REQUIRE(ended.has_value());
    MESSAGE(site, ": partition noticed ", *began - from_wall, " s after it began, its end ", *ended - to_wall, " s after");
    CHECK(*began >= from_wall);
    CHECK(*ended >= to_wall);
    CHECK(*began - from_wall < 1.0);
    CHECK(*ended - to_wall < 1.0);
  }
  // Both sides dropped transfers (the job has no other fault).
  const auto dropped = [&](const std::string& site) { return job.summary(site)["wan_transfers_dropped"].get<std::int64_t>(); };
  MESSAGE("transfers dropped: a ", dropped("a"), ", b ", dropped("b"), ", c ", dropped("c"));
  CHECK(dropped("c") > 0);
  CHECK(dropped("a") > 0);
  CHECK(dropped("b") > 0);
  bool added_logged = false;
  for (const auto& e : job.events("a")) added_logged = added_logged || e["event"] == "wan_fault_added";
  CHECK(added_logged);
}
