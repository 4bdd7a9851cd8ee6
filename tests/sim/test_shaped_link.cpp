// ShapedLink over an in-memory link on an injected clock (exact times), then over ZeroMQ on
// loopback against the real clock: the accuracy of a 64 MiB transfer, and a partition's edges.
#include <doctest/doctest.h>

#include <chrono>
#include <deque>
#include <map>
#include <set>

#include "sim/emulator/shaped_link.hpp"
#include "tests/support/copying_link.hpp"
#include "sim/emulator/wan_start.hpp"
#include "transport/link/zmq_link.hpp"

using namespace meridian;
using namespace std::chrono_literals;
using Fault = JobConfig::Wan::Fault;

namespace {

// A loopback stand-in on a fake clock: a transfer "arrives" at a set time; waiting for one moves
// the clock, as a real wait would.
class FakeLink : public testing::CopyingLink {
 public:
  using CopyingLink::send;
  FakeLink(std::string address, double& clock) : address_(std::move(address)), clock_(clock) {}
  std::string address() const override { return address_; }
  void send(const std::string& peer, std::uint64_t id, std::uint16_t, std::span<const std::byte>) override {
    sent.emplace_back(peer, id);
  }
  std::size_t chunk_bytes() const override { return kDefaultChunkBytes; }
  std::optional<Received> receive(std::chrono::milliseconds timeout) override {
    const double until = clock_ + static_cast<double>(timeout.count()) / 1000;
    if (!incoming_.empty() && incoming_.front().first <= until) {
      clock_ = std::max(clock_, incoming_.front().first);
      Received r = std::move(incoming_.front().second);
      incoming_.pop_front();
      return r;
    }
    clock_ = until;
    return std::nullopt;
  }
  void recycle(std::vector<std::byte>) override { ++recycled; }
  Counters counters() const override { return {}; }

  // A transfer from `peer` the loopback hands over at `at` (in order of `at`).
  void arrive(double at, const std::string& peer, std::uint64_t id, std::size_t bytes) {
    incoming_.emplace_back(at, Received{peer, id, 1, std::vector<std::byte>(bytes)});
  }
  // The stamp a sending ShapedLink puts before transfer `id`: it was sent at `sent`.
  void arrive_stamp(double at, const std::string& peer, std::uint64_t id, double sent) {
    const auto bytes = std::as_bytes(std::span(&sent, 1));
    incoming_.emplace_back(at, Received{peer, id | ShapedLink::kStampBit, ShapedLink::kStampTag, {bytes.begin(), bytes.end()}});
  }
  // The ids sent, stamps left out.
  std::vector<std::pair<std::string, std::uint64_t>> transfers_sent() const {
    std::vector<std::pair<std::string, std::uint64_t>> out;
    for (const auto& s : sent)
      if ((s.second & ShapedLink::kStampBit) == 0) out.push_back(s);
    return out;
  }

  std::vector<std::pair<std::string, std::uint64_t>> sent;
  int recycled = 0;

 private:
  std::string address_;
  double& clock_;
  std::deque<std::pair<double, Received>> incoming_;
};

JobConfig::Wan wan_of(WanLink link) {
  JobConfig::Wan wan;
  wan.link = link;
  return wan;
}

// This site is "m"; peers "a" and "b" at tcp://a and tcp://b.
struct Fixture {
  double now = 0;
  FakeLink* inner = nullptr;
  std::unique_ptr<ShapedLink> link;
  std::map<std::string, std::string> sites{{"tcp://a", "a"}, {"tcp://b", "b"}};

  explicit Fixture(JobConfig::Wan wan) {
    JobConfig c;
    c.sites = {{.name = "m"}, {.name = "a"}, {.name = "b"}};
    c.wan = std::move(wan);
    auto schedule = std::make_shared<WanSchedule>(c);
    schedule->set_start(0);
    auto fake = std::make_unique<FakeLink>("tcp://m", now);
    inner = fake.get();
    link = std::make_unique<ShapedLink>(
        std::move(fake), "m", schedule,
        [this](const std::string& address) {
          const auto it = sites.find(address);
          return it == sites.end() ? nullptr : &it->second;
        },
        [this] { return now; }, 1, LinkModelOptions{.burst_bytes = 0});
  }
  void send(double at, const std::string& peer, std::uint64_t id) {
    now = at;
    link->send(peer, id, 1, std::span<const std::byte>());
  }
};

}  // namespace

TEST_CASE("a transfer is held until its emulated arrival: bandwidth, then latency") {
  Fixture f(wan_of({.latency_ms = 50, .bandwidth_mbps = 8}));  // 1e6 bytes/s
  f.inner->arrive(1.0, "tcp://a", 7, 1'000'000);
  CHECK_FALSE(f.link->receive(500ms).has_value());
  CHECK(f.now == doctest::Approx(0.5));  // waited its timeout, no longer
  CHECK_FALSE(f.link->receive(1000ms).has_value());  // arrived at 1.0 on loopback, due at 2.05
  CHECK(f.now == doctest::Approx(1.5));
  const auto r = f.link->receive(10s);
  REQUIRE(r.has_value());
  CHECK(r->transfer_id == 7);
  CHECK(f.now == doctest::Approx(2.05).epsilon(0.001));  // returned when due, not at the timeout
  CHECK(f.link->shaping().delivered == 1);
  CHECK(f.link->shaping().transit_s == doctest::Approx(1.05));
}

TEST_CASE("a site's link to a peer is one flow: it runs at stream_mbps where that is below the bandwidth") {
  Fixture f(wan_of({.latency_ms = 50, .bandwidth_mbps = 80, .stream_mbps = 8}));  // one flow: 1e6 bytes/s
  f.inner->arrive(1.0, "tcp://a", 7, 1'000'000);
  const auto r = f.link->receive(10s);
  REQUIRE(r.has_value());
  CHECK(f.now == doctest::Approx(2.05).epsilon(0.001));
}

TEST_CASE("a stamped transfer's emulated link starts when it was sent, not when loopback delivered it") {
  Fixture f(wan_of({.latency_ms = 50, .bandwidth_mbps = 8}));
  f.send(0.25, "tcp://b", 9);
  CHECK(f.inner->sent == std::vector<std::pair<std::string, std::uint64_t>>{{"tcp://b", 9 | ShapedLink::kStampBit},
                                                                            {"tcp://b", 9}});
  f.now = 0;
  f.inner->arrive_stamp(0.0, "tcp://a", 7, 0.0);
  f.inner->arrive(0.8, "tcp://a", 7, 1'000'000);  // loopback took 0.8 s of the emulated 1.05
  auto r = f.link->receive(10s);
  REQUIRE(r.has_value());
  CHECK(r->transfer_id == 7);
  CHECK(f.now == doctest::Approx(1.05).epsilon(0.001));
  // Loopback slower than the emulated link: handed out when it really arrived, never before.
  f.inner->arrive_stamp(5.0, "tcp://a", 8, 5.0);
  f.inner->arrive(7.0, "tcp://a", 8, 1000);
  r = f.link->receive(10s);
  REQUIRE(r.has_value());
  CHECK(r->transfer_id == 8);
  CHECK(f.now == doctest::Approx(7.0));
  CHECK(f.inner->recycled == 2);  // the stamps' bytes
}

TEST_CASE("one look takes everything that arrived: a stamp does not cost the caller's pump its turn") {
  Fixture f(wan_of({}));  // shaping nothing: due on arrival
  f.now = 10;
  f.inner->arrive_stamp(9.9, "tcp://a", 20, 9.9);
  f.inner->arrive(9.95, "tcp://a", 20, 100);
  f.inner->arrive_stamp(9.96, "tcp://b", 21, 9.96);
  f.inner->arrive(9.97, "tcp://b", 21, 100);
  auto r = f.link->receive(0ms);
  REQUIRE(r.has_value());
  CHECK(r->transfer_id == 20);
  r = f.link->receive(0ms);
  REQUIRE(r.has_value());
  CHECK(r->transfer_id == 21);
  CHECK(f.now == 10);  // no waiting
}

TEST_CASE("each pair has its own link: a fast peer's later transfer overtakes a slow peer's") {
  auto wan = wan_of({.latency_ms = 10});
  wan.links = {{"a", "m", {.latency_ms = 500}}};
  Fixture f(wan);
  f.inner->arrive(0.0, "tcp://a", 1, 100);
  f.inner->arrive(0.1, "tcp://b", 2, 100);
  auto first = f.link->receive(5s);
  REQUIRE(first.has_value());
  CHECK(first->peer == "tcp://b");
  CHECK(f.now == doctest::Approx(0.11).epsilon(0.01));
  auto second = f.link->receive(5s);
  REQUIRE(second.has_value());
  CHECK(second->peer == "tcp://a");
  CHECK(f.now == doctest::Approx(0.5).epsilon(0.01));
  // A peer the link cannot name yet takes the default link.
  f.inner->arrive(1.0, "tcp://x", 3, 100);
  REQUIRE(f.link->receive(5s).has_value());
  CHECK(f.now == doctest::Approx(1.01).epsilon(0.01));
}

TEST_CASE("a partition drops transfers both ways, and only while it holds") {
  auto wan = wan_of({.latency_ms = 100});
  wan.faults = {{.kind = Fault::Kind::Partition, .sites = {"b"}, .from_s = 1, .to_s = 2}};
  Fixture f(wan);
  f.send(0.5, "tcp://b", 1);
  f.send(1.5, "tcp://b", 2);  // b is cut off: not sent
  f.send(1.5, "tcp://a", 3);  // a and m are on the same side
  f.send(2.0, "tcp://b", 4);  // healed
  CHECK(f.inner->transfers_sent() ==
        std::vector<std::pair<std::string, std::uint64_t>>{{"tcp://b", 1}, {"tcp://a", 3}, {"tcp://b", 4}});
  CHECK(f.inner->sent.size() == 6);  // each with its stamp
  CHECK(f.link->shaping().dropped_sent == 1);

  f.now = 0;
  f.inner->arrive(0.95, "tcp://b", 10, 100);  // due at 1.05: the partition began on its way
  f.inner->arrive(1.20, "tcp://b", 11, 100);  // arrives during the partition
  f.inner->arrive(1.30, "tcp://a", 12, 100);  // another peer: through
  f.inner->arrive(2.10, "tcp://b", 13, 100);  // after: through
  std::vector<std::uint64_t> got;
  while (f.now < 5)
    if (auto r = f.link->receive(1s)) got.push_back(r->transfer_id);
  CHECK(got == std::vector<std::uint64_t>{12, 13});
  CHECK(f.link->shaping().dropped_received == 2);
  CHECK(f.inner->recycled == 2);  // dropped bytes go back to the link's pool (no stamps here)
}

TEST_CASE("a site that is itself cut off hears nobody, even a peer it cannot name") {
  auto wan = wan_of({.latency_ms = 1});
  wan.faults = {{.kind = Fault::Kind::Partition, .sites = {"m"}, .from_s = 0, .to_s = 10}};
  Fixture f(wan);
  f.inner->arrive(1.0, "tcp://x", 1, 100);
  f.inner->arrive(11.0, "tcp://x", 2, 100);
  const auto r = f.link->receive(20s);
  REQUIRE(r.has_value());
  CHECK(r->transfer_id == 2);
  f.send(5, "tcp://x", 3);
  CHECK(f.inner->sent.empty());  // not even its stamp
}

TEST_CASE("real time: 64 MiB over 100 Mbit/s and 50 ms takes latency + size / bandwidth, within 10%") {
  JobConfig c;
  c.sites = {{.name = "a"}, {.name = "b"}};
  c.wan.link = {.latency_ms = 50, .bandwidth_mbps = 100};
  auto schedule = std::make_shared<WanSchedule>(c);
  schedule->set_start(wall_clock_s());
  const auto nobody = [](const std::string&) -> const std::string* { return nullptr; };
  auto tx = std::make_unique<ShapedLink>(make_zmq_link("127.0.0.1"), "a", schedule, nobody, wall_clock_s, 1);
  ShapedLink rx(make_zmq_link("127.0.0.1"), "b", schedule, nobody, wall_clock_s, 2);
  auto payload = std::make_shared<const std::vector<std::byte>>(64u << 20, std::byte{7});
  const auto t0 = std::chrono::steady_clock::now();
  tx->send(rx.address(), 1, 1, payload);
  std::optional<Received> got;
  while (!got && std::chrono::steady_clock::now() - t0 < 30s) {
    got = rx.receive(100ms);
    tx->receive(0ms);  // answers re-requests, if any
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(got.has_value());
  CHECK(got->bytes.size() == payload->size());
  const double expected = 0.050 + static_cast<double>(payload->size()) * 8 / 100e6;
  MESSAGE("64 MiB over 100 Mbit/s, 50 ms: ", took, " s from send to receive; latency + size / bandwidth = ", expected,
          " s (", 100 * (took - expected) / expected, "%)");
  CHECK(std::abs(took - expected) <= 0.10 * expected);
}

TEST_CASE("real time: a scheduled partition starts and ends within 100 ms of its schedule") {
  JobConfig c;
  c.sites = {{.name = "a"}, {.name = "b"}};
  c.wan.link = {.latency_ms = 1};
  c.wan.faults = {{.kind = Fault::Kind::Partition, .sites = {"b"}, .from_s = 0.3, .to_s = 0.8}};
  auto schedule = std::make_shared<WanSchedule>(c);
  auto inner_a = make_zmq_link("127.0.0.1"), inner_b = make_zmq_link("127.0.0.1");
  const std::map<std::string, std::string> sites{{inner_a->address(), "a"}, {inner_b->address(), "b"}};
  const auto site_of = [&](const std::string& address) {
    const auto it = sites.find(address);
    return it == sites.end() ? nullptr : &it->second;
  };
  ShapedLink a(std::move(inner_a), "a", schedule, site_of, wall_clock_s, 1);
  ShapedLink b(std::move(inner_b), "b", schedule, site_of, wall_clock_s, 2);
  const auto reachable = control_reachable(schedule, "b", wall_clock_s);
  const double start = wall_clock_s();
  schedule->set_start(start);
  std::map<std::uint64_t, double> sent_at;  // id -> seconds after start
  std::set<std::uint64_t> delivered;
  std::vector<std::pair<double, bool>> control;  // (seconds after start, reachable)
  const std::vector<std::byte> ping(64, std::byte{1});
  for (std::uint64_t id = 0; wall_clock_s() - start < 1.2; ++id) {
    sent_at[id] = wall_clock_s() - start;
    a.send(b.address(), id, 1, ping);
    while (auto r = b.receive(5ms)) delivered.insert(r->transfer_id);
    control.emplace_back(wall_clock_s() - start, reachable());
  }
  for (auto r = b.receive(100ms); r; r = b.receive(100ms)) delivered.insert(r->transfer_id);
  // Within 100 ms of the schedule means: whatever was sent (or asked) up to 0.2 s and from 0.9 s
  // went through, and nothing from 0.4 to 0.7 s did. (A loaded machine may leave gaps between
  // sends, so each window must also have seen some.)
  const auto in = [](double t, double from, double to) { return from <= t && t <= to; };
  int checked[3] = {0, 0, 0};
  for (const auto& [id, t] : sent_at) {
    CAPTURE(t);
    if (t <= 0.2 || in(t, 0.9, 1.15)) {
      CHECK(delivered.contains(id));
      ++checked[t <= 0.2 ? 0 : 2];
    }
    if (in(t, 0.4, 0.7)) {
      CHECK_FALSE(delivered.contains(id));
      ++checked[1];
    }
  }
  for (const auto& [t, up] : control) {
    CAPTURE(t);
    if (t <= 0.2 || in(t, 0.9, 1.15)) CHECK(up);
    if (in(t, 0.4, 0.7)) CHECK_FALSE(up);
  }
  CHECK((checked[0] > 0 && checked[1] > 0 && checked[2] > 0));
  // The edges as the sends saw them: the first lost, and the first through after it.
  std::optional<double> lost_from, back_from;
  for (const auto& [id, t] : sent_at) {
    if (!lost_from && !delivered.contains(id)) lost_from = t;
    if (lost_from && !back_from && delivered.contains(id)) back_from = t;
  }
  REQUIRE((lost_from && back_from));
  MESSAGE("partition scheduled 0.3-0.8 s: sends lost from ", *lost_from, " s to ", *back_from, " s");
  CHECK(a.shaping().dropped_sent > 0);  // a did not even send to b while b was cut off
}
