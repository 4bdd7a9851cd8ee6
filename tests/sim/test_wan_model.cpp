// The WAN model: sim/emulator's per-direction link model under the pair's link and the faults.
#include <doctest/doctest.h>

#include <cmath>

#include "sim/des/wan_model.hpp"

using namespace meridian;
using namespace meridian::sim;

TEST_CASE("a transfer takes the bytes at the link's bandwidth plus the one-way latency") {
  WanModel wan(3, WanLink{.latency_ms = 50, .bandwidth_mbps = 100});
  // The emulator's bucket lets its first 64 KiB out at once; the rest goes at 100 Mbit/s.
  CHECK(wan.transfer_s(0, 1, 1e6, 0) == doctest::Approx(0.05 + (1e6 - 65536) * 8 / 1e8));
  CHECK(wan.transfer_s(1, 1, 1e6, 0) == 0);
  wan.set_link(2, 0, WanLink{.latency_ms = 150, .bandwidth_mbps = 0});  // unlimited: latency only
  CHECK(wan.transfer_s(0, 2, 1e9, 0) == doctest::Approx(0.15));
  CHECK(wan.nominal_s(0, 1, 1e6) == doctest::Approx(0.13));
}

TEST_CASE("one direction is a queue: a transfer waits for the bytes ahead of it, the other direction is free") {
  WanModel wan(2, WanLink{.latency_ms = 10, .bandwidth_mbps = 8});
  const double burst = 65536 * 8 / 8e6;  // what the bucket lets out at once, in seconds of bandwidth
  CHECK(wan.transfer_s(0, 1, 2e6, 0) == doctest::Approx(2.01 - burst));
  CHECK(wan.transfer_s(0, 1, 1e6, 1) == doctest::Approx(2.01 - burst));  // sent until 3 - burst
  CHECK(wan.transfer_s(1, 0, 1e6, 1) == doctest::Approx(1.01 - burst));
  CHECK(wan.transfer_s(0, 1, 1e6, 10) == doctest::Approx(1.01 - burst));  // drained, the bucket full again
}

TEST_CASE("flows side by side: the flow ceiling times the flows, and each flow recovers its own losses") {
  const WanLink link{.latency_ms = 50, .bandwidth_mbps = 800, .loss = 1e-3, .stream_mbps = 8};
  WanModel one(2, link, 5, LinkModelOptions{.burst_bytes = 0}), four(2, link, 5, LinkModelOptions{.burst_bytes = 0});
  // The same seed loses the same packets: 4 MB at 1 MB/s over one flow, at 4 MB/s over four.
  const double lost_rtts_one = one.transfer_s(0, 1, 4e6, 0) - 0.05 - 4.0;
  const double lost_rtts_four = four.transfer_s(0, 1, 4e6, 0, 4) - 0.05 - 1.0;
  CHECK(lost_rtts_one > 0.1);  // about 2,700 packets at 1e-3: a few lost, 0.1 s each
  CHECK(lost_rtts_four == doctest::Approx(lost_rtts_one / 4));
}

TEST_CASE("faults: bandwidth and latency while in force, a partition delays the start until it heals") {
  WanModel wan(3, WanLink{.latency_ms = 10, .bandwidth_mbps = 0});
  wan.add_fault({.kind = WanFault::Kind::Bandwidth, .sites = {2}, .from_s = 10, .to_s = 20, .bandwidth_mbps = 8});
  wan.add_fault({.kind = WanFault::Kind::Latency, .sites = {0, 1}, .pair = true, .from_s = 0, .to_s = 5,
                 .latency_ms = 90});
  wan.add_fault({.kind = WanFault::Kind::Partition, .sites = {1}, .from_s = 30, .to_s = 40});
  CHECK(wan.transfer_s(0, 1, 0, 1) == doctest::Approx(0.1));
  CHECK(wan.transfer_s(0, 2, 0, 1) == doctest::Approx(0.01));  // the latency fault is the pair's
  CHECK(wan.transfer_s(0, 2, 1e6 + 65536, 12) == doctest::Approx(0.01 + 1.0));
  CHECK(wan.transfer_s(0, 2, 1e6, 25) == doctest::Approx(0.01));  // back to unlimited
  CHECK(wan.transfer_s(0, 1, 1e6, 35) == doctest::Approx(5 + 0.01));
  CHECK(wan.transfer_s(0, 2, 1e6, 35) == doctest::Approx(0.01));  // 0 and 2 are on one side
}

TEST_CASE("jitter comes from the emulator's draws, the means it documents, never below zero, each loss a round trip") {
  for (auto kind : {WanLink::Jitter::Normal, WanLink::Jitter::Uniform, WanLink::Jitter::Pareto}) {
    WanModel wan(2, WanLink{.latency_ms = 50, .jitter_ms = 10, .jitter = kind}, 7);
    double sum = 0, lo = 1e9;
    constexpr int n = 20000;
    for (int i = 0; i < n; ++i) {
      const double s = wan.transfer_s(0, 1, 0, 10.0 * i);  // spaced out: no arrival waits on the last
      sum += s, lo = std::min(lo, s);
    }
    const double extra_ms = kind == WanLink::Jitter::Pareto ? 10 : 0;  // Lomax of mean jitter
    CHECK(1000 * sum / n == doctest::Approx(50 + extra_ms).epsilon(0.03));
    CHECK(lo >= (kind == WanLink::Jitter::Pareto ? 0.05 : 0.0));
  }
  WanModel lossy(2, WanLink{.latency_ms = 20, .loss = 0.01}, 3);
  int retried = 0;
  for (int i = 0; i < 10000; ++i) retried += lossy.transfer_s(0, 1, 100, 10.0 * i) > 0.03;
  CHECK(retried == doctest::Approx(100).epsilon(0.3));  // one packet: lost one time in a hundred
}

TEST_CASE("lost packets: binomial counts, Poisson or normal by their mean") {
  Rng rng(3);
  double sum = 0;
  for (int i = 0; i < 2000; ++i) sum += sample_lost_packets(667, 0.01, rng);
  CHECK(sum / 2000 == doctest::Approx(6.67).epsilon(0.05));
  double big = 0;
  for (int i = 0; i < 2000; ++i) big += sample_lost_packets(1e6, 0.001, rng);
  CHECK(big / 2000 == doctest::Approx(1000).epsilon(0.01));
  CHECK(sample_lost_packets(100, 0, rng) == 0);
  CHECK(sample_lost_packets(3, 0.9, rng) <= 3);
}

TEST_CASE("the same seed draws the same delays, another seed others") {
  const WanLink link{.latency_ms = 50, .jitter_ms = 10};
  WanModel a(2, link, 1), b(2, link, 1), c(2, link, 2);
  double da = 0, db = 0, dc = 0;
  for (int i = 0; i < 10; ++i) da += a.transfer_s(0, 1, 0, i), db += b.transfer_s(0, 1, 0, i), dc += c.transfer_s(0, 1, 0, i);
  CHECK(da == db);
  CHECK(da != dc);
}
