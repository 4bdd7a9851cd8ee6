#include <doctest/doctest.h>

#include <cmath>

#include "sim/des/wan_model.hpp"

using namespace meridian;
using namespace meridian::sim;

TEST_CASE("a transfer takes the one-way latency plus the bytes at the link's bandwidth") {
  WanModel wan(3, WanLink{.latency_ms = 50, .bandwidth_mbps = 100});
  Rng rng(1);
  CHECK(wan.transfer_s(0, 1, 1e6, 0, rng) == doctest::Approx(0.05 + 0.08));
  CHECK(wan.transfer_s(1, 1, 1e6, 0, rng) == 0);
  wan.set_link(2, 0, WanLink{.latency_ms = 150, .bandwidth_mbps = 0});  // unlimited: latency only
  CHECK(wan.transfer_s(0, 2, 1e9, 0, rng) == doctest::Approx(0.15));
  CHECK(wan.nominal_s(0, 1, 1e6) == doctest::Approx(0.13));
}

TEST_CASE("faults: bandwidth and latency while in force, a partition delays the start until it heals") {
  WanModel wan(3, WanLink{.latency_ms = 10, .bandwidth_mbps = 80});
  wan.add_fault({.kind = WanFault::Kind::Bandwidth, .sites = {2}, .from_s = 10, .to_s = 20, .bandwidth_mbps = 8});
  wan.add_fault({.kind = WanFault::Kind::Latency, .sites = {0, 1}, .pair = true, .from_s = 0, .to_s = 5,
                 .latency_ms = 90});
  wan.add_fault({.kind = WanFault::Kind::Partition, .sites = {1}, .from_s = 30, .to_s = 40});
  Rng rng(1);
  CHECK(wan.transfer_s(0, 1, 0, 1, rng) == doctest::Approx(0.1));
  CHECK(wan.transfer_s(0, 2, 0, 1, rng) == doctest::Approx(0.01));  // the latency fault is the pair's
  CHECK(wan.transfer_s(0, 2, 1e6, 12, rng) == doctest::Approx(0.01 + 1.0));
  CHECK(wan.transfer_s(0, 2, 1e6, 25, rng) == doctest::Approx(0.01 + 0.1));
  CHECK(wan.transfer_s(0, 1, 1e6, 35, rng) == doctest::Approx(5 + 0.01 + 0.1));
  CHECK(wan.transfer_s(0, 2, 1e6, 35, rng) == doctest::Approx(0.01 + 0.1));  // 0 and 2 are on one side
}

TEST_CASE("jitter: normal around the latency, uniform within it, pareto only adds; never negative") {
  Rng rng(7);
  for (auto kind : {WanLink::Jitter::Normal, WanLink::Jitter::Uniform, WanLink::Jitter::Pareto}) {
    const WanLink link{.latency_ms = 50, .jitter_ms = 10, .jitter = kind};
    double sum = 0, lo = 1e9, hi = 0;
    constexpr int n = 20000;
    for (int i = 0; i < n; ++i) {
      const double s = sample_latency_s(link, rng);
      sum += s, lo = std::min(lo, s), hi = std::max(hi, s);
    }
    const double mean_ms = 1000 * sum / n;
    if (kind == WanLink::Jitter::Pareto) {
      CHECK(lo >= 0.05);
      CHECK(mean_ms == doctest::Approx(60).epsilon(0.03));  // Lomax of mean jitter
    } else {
      CHECK(mean_ms == doctest::Approx(50).epsilon(0.01));
      CHECK(lo >= 0);
    }
    if (kind == WanLink::Jitter::Uniform) CHECK(hi <= 0.06);
  }
  const WanLink wide{.latency_ms = 1, .jitter_ms = 100};
  for (int i = 0; i < 1000; ++i) CHECK(sample_latency_s(wide, rng) >= 0);
}

TEST_CASE("loss: each lost packet costs a round trip; counts are binomial") {
  Rng rng(3);
  double sum = 0;
  for (int i = 0; i < 2000; ++i) sum += sample_lost_packets(667, 0.01, rng);
  CHECK(sum / 2000 == doctest::Approx(6.67).epsilon(0.05));
  double big = 0;
  for (int i = 0; i < 2000; ++i) big += sample_lost_packets(1e6, 0.001, rng);
  CHECK(big / 2000 == doctest::Approx(1000).epsilon(0.01));
  CHECK(sample_lost_packets(100, 0, rng) == 0);
  WanModel wan(2, WanLink{.latency_ms = 20, .bandwidth_mbps = 8, .loss = 0.01});
  int retried = 0;
  for (int i = 0; i < 10000; ++i) retried += wan.transfer_s(0, 1, 100, 1000.0 * i, rng) > 0.03;
  CHECK(retried == doctest::Approx(100).epsilon(0.3));  // one packet: lost one time in a hundred
}

TEST_CASE("one direction is a queue: a transfer waits for the bytes ahead of it; the other direction is free") {
  WanModel wan(2, WanLink{.latency_ms = 10, .bandwidth_mbps = 8});
  Rng rng(1);
  CHECK(wan.transfer_s(0, 1, 2e6, 0, rng) == doctest::Approx(2.01));
  CHECK(wan.transfer_s(0, 1, 1e6, 1, rng) == doctest::Approx(2.01));  // sent 2-3, due at 3.01
  CHECK(wan.transfer_s(1, 0, 1e6, 1, rng) == doctest::Approx(1.01));
  CHECK(wan.transfer_s(0, 1, 1e6, 10, rng) == doctest::Approx(1.01));  // the queue has drained
}
