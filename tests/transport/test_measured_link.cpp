// MeasuredLink over an in-memory wire on a fake clock (exact figures): probes and echoes give the
// round trip, stamped transfers the bandwidth each way, and none of its own transfers reaches the
// caller.
#include <doctest/doctest.h>

#include <cmath>
#include <deque>
#include <map>

#include "tests/support/copying_link.hpp"
#include "transport/link/measured_link.hpp"

using namespace meridian;
using namespace std::chrono_literals;

namespace {

// Two or more endpoints on one fake clock: a transfer arrives latency + size / bandwidth after it
// was sent, in order; waiting for one moves the clock, as a real wait would.
struct Wire {
  double clock = 0;
  double latency_s = 0.05;
  double bytes_per_s = 100e6 / 8;
  std::map<std::string, std::deque<std::pair<double, Received>>> queues;  // by receiver
  std::uint64_t sent = 0;
};

class WireLink : public testing::CopyingLink {
 public:
  using CopyingLink::send;
  WireLink(std::string address, Wire& wire) : address_(std::move(address)), wire_(wire) {}
  std::string address() const override { return address_; }
  void send(const std::string& peer, std::uint64_t id, std::uint16_t tag, std::span<const std::byte> payload) override {
    auto& q = wire_.queues[peer];
    double at = wire_.clock + wire_.latency_s + static_cast<double>(payload.size()) / wire_.bytes_per_s;
    if (!q.empty()) at = std::max(at, q.back().first);
    q.emplace_back(at, Received{address_, id, tag, {payload.begin(), payload.end()}});
    ++wire_.sent;
  }
  std::size_t chunk_bytes() const override { return 1 << 20; }
  std::optional<Received> receive(std::chrono::milliseconds timeout) override {
    const double until = wire_.clock + static_cast<double>(timeout.count()) / 1000;
    auto& q = wire_.queues[address_];
    if (!q.empty() && q.front().first <= until) {
      wire_.clock = std::max(wire_.clock, q.front().first);
      Received r = std::move(q.front().second);
      q.pop_front();
      return r;
    }
    wire_.clock = until;
    return std::nullopt;
  }
  void recycle(std::vector<std::byte>) override {}
  Counters counters() const override { return {}; }

 private:
  std::string address_;
  Wire& wire_;
};

struct Pair {
  Wire wire;
  MeasuredLink a{std::make_unique<WireLink>("a", wire), [this] { return wire.clock; }, {}};
  MeasuredLink b{std::make_unique<WireLink>("b", wire), [this] { return wire.clock; }, {}};
  // Pumps both sides in turn until `until` (fake seconds); returns what the callers got.
  std::vector<Received> pump(double until) {
    std::vector<Received> out;
    while (wire.clock < until)
      for (MeasuredLink* l : {&a, &b})
        if (auto r = l->receive(10ms)) out.push_back(std::move(*r));
    return out;
  }
};

std::vector<std::byte> bytes(std::size_t n) { return std::vector<std::byte>(n, std::byte{7}); }

}  // namespace

TEST_CASE("a probe's echo gives the round trip, its figure is over recent samples, with their count and time") {
  Pair p;
  p.a.send("b", 1, 1, bytes(10));  // a talks to b: b is probed from now on
  const auto got = p.pump(0.5);
  REQUIRE(got.size() == 1);  // the caller's transfer only: probes and echoes are the link's own
  CHECK(got[0].transfer_id == 1);
  const auto fa = p.a.figures().at("b");
  REQUIRE(fa.rtt_s.has_value());
  // 2 x 50 ms on the wire, plus up to one pump interval (10 ms) on each side before it is looked at.
  CHECK(fa.rtt_s->min >= 0.1);
  CHECK(fa.rtt_s->median <= 0.12 + 1e-9);
  CHECK(fa.rtt_s->samples == 1);
  CHECK(fa.rtt_s->at <= p.wire.clock);
  // b heard from a, so it probes a too.
  REQUIRE(p.b.figures().at("a").rtt_s.has_value());
  p.pump(6.6);  // a probe every 2 s
  CHECK(p.a.figures().at("b").rtt_s->samples == 4);
  CHECK_FALSE(p.a.figures().at("b").in_mbps.has_value());  // small transfers measure no bandwidth
}

TEST_CASE("bandwidth: bytes over the time from the sender's stamp to delivery, each way, the outbound one via echoes") {
  Pair p;
  p.wire.latency_s = 0.01;
  p.wire.bytes_per_s = 10e6 / 8;  // 10 Mbit/s
  p.a.send("b", 5, 1, bytes(1'000'000));
  p.pump(3);
  // b: 8 Mbit in 0.01 s + 0.8 s (the stamp arrives first, the transfer 0.8 s later), within a pump interval.
  const auto in = p.b.figures().at("a").in_mbps;
  REQUIRE(in.has_value());
  CHECK(in->median == doctest::Approx(8.0 / 0.81).epsilon(0.02));
  CHECK(in->samples == 1);
  // a learns it from b's echo of its next probe (every 2 s).
  const auto out = p.a.figures().at("b").out_mbps;
  REQUIRE(out.has_value());
  CHECK(out->median == doctest::Approx(in->median));
  CHECK(out->at == in->at);
  CHECK_FALSE(p.a.figures().at("b").in_mbps.has_value());  // nothing big came from b
}

TEST_CASE("a window of recent samples: the median follows a change, the count keeps growing") {
  Pair p;
  p.a.send("b", 0, 1, bytes(1));
  for (int i = 0; i < 20; ++i) {
    p.wire.latency_s = i < 10 ? 0.05 : 0.2;
    p.pump(2.0 * (i + 1));
  }
  const auto rtt = p.a.figures().at("b").rtt_s;
  REQUIRE(rtt.has_value());
  CHECK(rtt->samples >= 18);
  CHECK(rtt->median > 0.39);  // the last 16 samples are mostly from the slow half
  CHECK(rtt->min < 0.2);      // one of the fast half's is still in the window
}

TEST_CASE("malformed transfers under the link's own tags are dropped, never handed to the caller") {
  Pair p;
  WireLink raw("x", p.wire);
  raw.send("a", MeasuredLink::kOwnBit | MeasuredLink::kEchoBit | 3, MeasuredLink::kEchoTag, bytes(3));
  raw.send("a", MeasuredLink::kOwnBit | MeasuredLink::kProbeBit | 3, MeasuredLink::kProbeTag, bytes(5));
  raw.send("a", 9, 1, bytes(4));  // the caller's
  const auto got = p.pump(1);
  REQUIRE(got.size() == 1);
  CHECK(got[0].transfer_id == 9);
  CHECK_FALSE(p.a.figures().at("x").rtt_s.has_value());
}
