#include <doctest/doctest.h>

#include "sim/emulator/wan_schedule.hpp"
#include "sim/emulator/wan_start.hpp"

using namespace meridian;
using Fault = JobConfig::Wan::Fault;

namespace {

JobConfig job() {
  JobConfig c;
  c.sites = {{.name = "us"}, {.name = "eu"}, {.name = "ap"}};
  c.wan.link = {.latency_ms = 40, .bandwidth_mbps = 1000};
  c.wan.links = {{"ap", "us", {.latency_ms = 55, .bandwidth_mbps = 500}}};
  c.wan.faults = {{.kind = Fault::Kind::Partition, .sites = {"ap"}, .from_s = 30, .to_s = 60},
                  {.kind = Fault::Kind::Bandwidth, .sites = {"us", "eu"}, .pair = true, .from_s = 10, .to_s = 20,
                   .bandwidth_mbps = 10},
                  {.kind = Fault::Kind::Bandwidth, .sites = {"eu"}, .from_s = 15, .to_s = 25, .bandwidth_mbps = 50},
                  {.kind = Fault::Kind::Latency, .sites = {"us"}, .from_s = 0, .to_s = 5, .latency_ms = 200}};
  return c;
}

constexpr double kStart = 1.7e9;  // wall-clock seconds

}  // namespace

TEST_CASE("a partition holds from from_s to to_s after the job's start, and only across its cut") {
  WanSchedule s(job());
  CHECK_FALSE(s.cut_off("ap", kStart + 40));  // no start agreed yet: no fault holds
  s.set_start(kStart);
  CHECK_FALSE(s.cut_off("ap", kStart + 29.999));
  CHECK(s.cut_off("ap", kStart + 30));
  CHECK(s.cut_off("ap", kStart + 59.999));
  CHECK_FALSE(s.cut_off("ap", kStart + 60));
  CHECK_FALSE(s.cut_off("us", kStart + 45));
  CHECK(s.partitioned("us", "ap", kStart + 45));
  CHECK(s.partitioned("ap", "eu", kStart + 45));
  CHECK_FALSE(s.partitioned("us", "eu", kStart + 45));
  CHECK_FALSE(s.partitioned("us", "ap", kStart + 61));

  const auto reachable = control_reachable(std::make_shared<WanSchedule>(job()), "ap", [] { return kStart + 45; });
  CHECK(reachable());  // that schedule has no start yet
}

TEST_CASE("links: per-pair figures, the lowest bandwidth fault and added latency while they hold") {
  WanSchedule s(job());
  s.set_start(kStart);
  CHECK(s.link("us", "eu", kStart + 6) == WanLink{.latency_ms = 40, .bandwidth_mbps = 1000});
  CHECK(s.link("ap", "us", kStart + 6) == WanLink{.latency_ms = 55, .bandwidth_mbps = 500});
  CHECK(s.link("us", "ap", kStart + 6) == s.link("ap", "us", kStart + 6));
  CHECK(s.link("us", "ap", kStart + 1).latency_ms == 255);   // us is slowed: every link of it
  CHECK(s.link("eu", "ap", kStart + 1).latency_ms == 40);
  CHECK(s.link("us", "eu", kStart + 12).bandwidth_mbps == 10);  // the pair only
  CHECK(s.link("us", "ap", kStart + 12).bandwidth_mbps == 500);
  CHECK(s.link("eu", "us", kStart + 17).bandwidth_mbps == 10);  // both hold: the lower
  CHECK(s.link("eu", "ap", kStart + 17).bandwidth_mbps == 50);
  CHECK(s.link("eu", "ap", kStart + 25).bandwidth_mbps == 1000);
  CHECK(s.link("mars", "eu", kStart + 6) == WanLink{.latency_ms = 40, .bandwidth_mbps = 1000});  // not a site
}

TEST_CASE("the fault list can be replaced while the job runs (an operator's command)") {
  auto s = std::make_shared<WanSchedule>(job());
  s->set_start(kStart);
  double now = kStart + 100;
  const auto reachable = control_reachable(s, "eu", [&] { return now; });
  CHECK(reachable());
  s->replace_faults({{.kind = Fault::Kind::Partition, .sites = {"eu"}, .from_s = 100, .to_s = 101}});
  CHECK_FALSE(reachable());
  CHECK(s->partitioned("eu", "us", now));
  now = kStart + 101;
  CHECK(reachable());
  CHECK(s->faults().size() == 1);
}
