// The operator's faults as pure functions: a request checked and resolved against the job at a
// given time, what clearing leaves, the merged list, and the list's text in etcd.
#include <doctest/doctest.h>

#include "core/util/error.hpp"
#include "sim/emulator/operator_faults.hpp"
#include "sim/emulator/wan_schedule.hpp"

using namespace meridian;
using Kind = WanFault::Kind;

namespace {

JobConfig job() {
  JobConfig c;
  c.sites = {{.name = "a"}, {.name = "b"}, {.name = "c"}};
  c.wan.link = {.latency_ms = 20, .bandwidth_mbps = 100};
  c.wan.faults = {{.kind = Kind::Latency, .sites = {"c"}, .from_s = 100, .to_s = 110, .latency_ms = 5}};
  return c;
}

FaultRequest partition(std::string from, std::string to) { return {"partition", {"b"}, std::move(from), std::move(to), {}, {}}; }

std::string refusal(const FaultRequest& r, double now_s, const JobConfig& c = job()) {
  const auto out = resolve_fault(r, c, now_s);
  REQUIRE_MESSAGE(std::holds_alternative<std::string>(out), "accepted");
  return std::get<std::string>(out);
}

WanFault accepted(const FaultRequest& r, double now_s) {
  const auto out = resolve_fault(r, job(), now_s);
  REQUIRE_MESSAGE(std::holds_alternative<WanFault>(out), std::get<std::string>(out));
  return std::get<WanFault>(out);
}

}  // namespace

TEST_CASE("times: seconds from the job's start, or +N from now, anything else says what it expected") {
  auto t = parse_fault_time("12.5");
  REQUIRE(std::holds_alternative<FaultTime>(t));
  CHECK_FALSE(std::get<FaultTime>(t).relative);
  CHECK(std::get<FaultTime>(t).seconds == 12.5);
  t = parse_fault_time("+5");
  REQUIRE(std::holds_alternative<FaultTime>(t));
  CHECK(std::get<FaultTime>(t).relative);
  CHECK(std::get<FaultTime>(t).seconds == 5);
  for (const char* bad : {"", "+", "-3", "5s", "abc", "+-1", "1e999", "nan", " 5"}) {
    CAPTURE(bad);
    t = parse_fault_time(bad);
    REQUIRE(std::holds_alternative<std::string>(t));
    CHECK(std::get<std::string>(t).find("expected seconds") != std::string::npos);
  }
}

TEST_CASE("a request resolves to job seconds: +N counts from now") {
  const auto f = accepted(partition("+4", "+10"), 50);
  CHECK(f.kind == Kind::Partition);
  CHECK(f.sites == std::vector<std::string>{"b"});
  CHECK(f.from_s == 54);
  CHECK(f.to_s == 60);
  const auto g = accepted({"bandwidth", {"a", "c"}, "50", "70", 10.0, {}}, 50);
  CHECK(g.kind == Kind::Bandwidth);
  CHECK(g.bandwidth_mbps == 10);
  CHECK(g.from_s == 50);
  const auto l = accepted({"latency", {"a"}, "+0", "+1", {}, 30.0}, 50);
  CHECK(l.latency_ms == 30);
  CHECK_FALSE(l.pair);
  // --pair: only the link between the two sites, and it survives the trip through etcd.
  const auto p = accepted({"latency", {"a", "c"}, "+0", "+1", {}, 30.0, true}, 50);
  CHECK(p.pair);
  CHECK(decode_faults(encode_faults({p}), "test") == std::vector<WanFault>{p});
}

TEST_CASE("refusals name what is wrong") {
  JobConfig plain = job();
  plain.wan = {};
  CHECK(refusal(partition("+5", "+9"), 0, plain).find("no [wan] emulation") != std::string::npos);
  CHECK(refusal({"slow", {"b"}, "+5", "+9", {}, {}}, 0).find("kind must be") != std::string::npos);
  CHECK(refusal({"partition", {"x"}, "+5", "+9", {}, {}}, 0).find("\"x\" is not a site of the job (a, b, c)") !=
        std::string::npos);
  CHECK(refusal({"partition", {}, "+5", "+9", {}, {}}, 0).find("at least one site") != std::string::npos);
  CHECK(refusal({"partition", {"b", "b"}, "+5", "+9", {}, {}}, 0).find("named twice") != std::string::npos);
  CHECK(refusal({"partition", {"a", "b", "c"}, "+5", "+9", {}, {}}, 0).find("every site") != std::string::npos);
  CHECK(refusal(partition("+9", "+5"), 0).find("must be after from") != std::string::npos);
  CHECK(refusal(partition("20", "20"), 0).find("must be after from") != std::string::npos);
  CHECK(refusal(partition("5x", "+5"), 0).find("from: expected seconds") != std::string::npos);
  CHECK(refusal(partition("+5", "later"), 0).find("to: expected seconds") != std::string::npos);
  CHECK(refusal(partition("10", "20"), 30).find("which is past") != std::string::npos);
  // A partition needs the lead time; a bandwidth fault only a start not in the past beyond the grace.
  CHECK(refusal(partition("+2.9", "+10"), 40).find("at least 3 s from now") != std::string::npos);
  accepted(partition("+3", "+10"), 40);
  accepted({"bandwidth", {"a"}, "39.5", "50", 5.0, {}}, 40);
  CHECK(refusal({"bandwidth", {"a"}, "38.9", "50", 5.0, {}}, 40).find("in the past") != std::string::npos);
  CHECK(refusal({"bandwidth", {"a"}, "+1", "+2", {}, {}}, 0).find("needs bandwidth_mbps") != std::string::npos);
  CHECK(refusal({"bandwidth", {"a"}, "+1", "+2", 0.0, {}}, 0).find("must be a number > 0") != std::string::npos);
  CHECK(refusal({"latency", {"a"}, "+1", "+2", 5.0, 5.0}, 0).find("takes no bandwidth_mbps") != std::string::npos);
  CHECK(refusal({"partition", {"a", "b"}, "+5", "+9", {}, {}, true}, 0).find("pair: a partition cuts") !=
        std::string::npos);
  CHECK(refusal({"bandwidth", {"a"}, "+1", "+2", 5.0, {}, true}, 0).find("needs exactly 2 sites") != std::string::npos);
  CHECK(refusal({"bandwidth", {"a", "b", "c"}, "+1", "+2", 5.0, {}, true}, 0).find("found 3") != std::string::npos);
}

TEST_CASE("clearing removes what did not begin and what holds but cuts nobody off, a holding partition stays") {
  const std::vector<WanFault> faults = {
      {.kind = Kind::Partition, .sites = {"b"}, .from_s = 10, .to_s = 20},   // holds at 15: stays
      {.kind = Kind::Partition, .sites = {"c"}, .from_s = 30, .to_s = 40},   // not begun: goes
      {.kind = Kind::Bandwidth, .sites = {"a"}, .from_s = 12, .to_s = 18, .bandwidth_mbps = 1},  // holds: goes
      {.kind = Kind::Latency, .sites = {"a"}, .from_s = 1, .to_s = 2, .latency_ms = 1},          // over: goes
  };
  const auto c = clear_faults(faults, 15);
  REQUIRE(c.kept.size() == 1);
  CHECK(c.kept[0] == faults[0]);
  CHECK(c.removed.size() == 3);
  CHECK(clear_faults(faults, 25).kept.empty());
  CHECK(holds(faults[0], 10));
  CHECK_FALSE(holds(faults[0], 20));
}

TEST_CASE("the schedule runs the config's faults and then the operator's") {
  const JobConfig c = job();
  const std::vector<WanFault> ops = {{.kind = Kind::Partition, .sites = {"b"}, .from_s = 10, .to_s = 20}};
  const auto merged = merged_faults(c.wan.faults, ops);
  REQUIRE(merged.size() == 2);
  CHECK(merged[0] == c.wan.faults[0]);
  CHECK(merged[1] == ops[0]);
  WanSchedule s(c);
  s.set_start(1000);
  s.replace_faults(merged);
  CHECK(s.partitioned("a", "b", 1015));
  CHECK_FALSE(s.partitioned("a", "b", 1020));
  CHECK(s.link("a", "c", 1105).latency_ms == 25);
}

TEST_CASE("the list's text in etcd reads back as written, anything else is refused naming where") {
  const std::vector<WanFault> faults = {
      {.kind = Kind::Partition, .sites = {"b"}, .from_s = 10, .to_s = 20},
      {.kind = Kind::Bandwidth, .sites = {"a", "c"}, .pair = true, .from_s = 1.5, .to_s = 2.5, .bandwidth_mbps = 7},
      {.kind = Kind::Latency, .sites = {"a"}, .from_s = 3, .to_s = 4, .latency_ms = 9}};
  CHECK(decode_faults(encode_faults(faults), "k") == faults);
  CHECK(decode_faults(encode_faults({}), "k").empty());
  for (const char* bad : {"", "[]", "{\"faults\": 3}", "{\"faults\": [{\"kind\": \"x\", \"sites\": [], \"from_s\": 0, \"to_s\": 1}]}",
                          "{\"faults\": [{\"kind\": \"partition\", \"sites\": [1], \"from_s\": 0, \"to_s\": 1}]}",
                          "{\"faults\": [{\"kind\": \"partition\", \"sites\": [\"a\"], \"from_s\": 2, \"to_s\": 1}]}",
                          "{\"faults\": [{\"kind\": \"latency\", \"sites\": [\"a\"], \"from_s\": 0, \"to_s\": 1}]}"}) {
    CAPTURE(bad);
    try {
      decode_faults(bad, "/meridian/j/wan/faults");
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Peer);
      CHECK(std::string(e.what()).find("/meridian/j/wan/faults") != std::string::npos);
    }
  }
  CHECK(wan_faults_key("j") == "/meridian/j/wan/faults");
}
