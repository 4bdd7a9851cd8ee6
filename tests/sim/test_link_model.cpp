#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/util/error.hpp"
#include "sim/emulator/link_model.hpp"

using namespace meridian;

namespace {

struct Stats {
  double mean = 0, sd = 0, min = 1e300, max = -1e300;
};

Stats stats_of(const std::vector<double>& xs) {
  Stats s;
  for (double x : xs) s.mean += x, s.min = std::min(s.min, x), s.max = std::max(s.max, x);
  s.mean /= static_cast<double>(xs.size());
  for (double x : xs) s.sd += (x - s.mean) * (x - s.mean);
  s.sd = std::sqrt(s.sd / static_cast<double>(xs.size() - 1));
  return s;
}

// One-way latencies in ms of `n` draws.
std::vector<double> latencies_ms(const WanLink& link, int n, std::uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::vector<double> out;
  for (int i = 0; i < n; ++i) out.push_back(1000 * draw_latency_s(link, rng));
  return out;
}

}  // namespace

TEST_CASE("token bucket: a transfer drains the bucket at the link's rate, later ones queue behind it") {
  const WanLink link{.bandwidth_mbps = 8};  // 1e6 bytes/s, no latency
  LinkDirection d(1, {.burst_bytes = 0});
  CHECK(d.arrival(0, 1'000'000, link) == doctest::Approx(1.0));
  // Handed over at 0.5 while the first still drains: it leaves after the first, 0.5 s later.
  CHECK(d.arrival(0.5, 500'000, link) == doctest::Approx(1.5));
  // After a quiet spell the bucket is back at its depth (0 here): a transfer pays for itself only.
  CHECK(d.arrival(10, 250'000, link) == doctest::Approx(10.25));

  LinkDirection burst(1, {.burst_bytes = 65536});
  CHECK(burst.arrival(0, 65536, link) == doctest::Approx(0.0));        // the burst goes at once
  CHECK(burst.arrival(0, 1'000'000, link) == doctest::Approx(1.0));    // then the rate
  CHECK(burst.arrival(100, 10'000, link) == doctest::Approx(100.0));   // refilled, capped at its depth
  CHECK(burst.arrival(100, 65536, link) == doctest::Approx(100.01));   // 10,000 bytes over the depth

  // Unlimited bandwidth: only the latency counts.
  LinkDirection free(1);
  CHECK(free.arrival(3, 1 << 30, WanLink{.latency_ms = 50}) == doctest::Approx(3.05));
}

TEST_CASE("a flow gets stream_mbps at most, and flows side by side get that many times it, up to the link") {
  const WanLink link{.bandwidth_mbps = 80, .stream_mbps = 8};  // 10 MB/s the link, 1 MB/s a flow
  CHECK(flows_bytes_per_s(link, 1) == doctest::Approx(1e6));
  CHECK(flows_bytes_per_s(link, 4) == doctest::Approx(4e6));
  CHECK(flows_bytes_per_s(link, 20) == doctest::Approx(10e6));
  CHECK(flows_bytes_per_s(WanLink{.stream_mbps = 8}, 3) == doctest::Approx(3e6));   // no link limit
  CHECK(flows_bytes_per_s(WanLink{.bandwidth_mbps = 8}, 3) == doctest::Approx(1e6));  // no flow limit
  CHECK(flows_bytes_per_s(WanLink{}, 3) == 0);                                         // unlimited
  LinkDirection one(1, {.burst_bytes = 0}), four(1, {.burst_bytes = 0});
  CHECK(one.arrival(0, 2'000'000, link) == doctest::Approx(2.0));
  CHECK(four.arrival(0, 2'000'000, link, 4) == doctest::Approx(0.5));
}

TEST_CASE("a split transfer's parallelism: as many flows as the larger site has replicas, as StripedLink sends it") {
  CHECK(transfer_parallelism(1, 1) == doctest::Approx(1));
  for (int m = 1; m <= 8; ++m) CHECK(transfer_parallelism(m, m) == doctest::Approx(m));
  CHECK(transfer_parallelism(4, 2) == doctest::Approx(4));  // each of the 4 senders' quarter goes whole to one receiver
  CHECK(transfer_parallelism(1, 4) == doctest::Approx(4));  // one sender, four flows to four owners
  CHECK(transfer_parallelism(3, 2) == doctest::Approx(3));  // cuts at 1/3, 1/2, 2/3: largest piece a third
  CHECK(transfer_parallelism(2, 3) == doctest::Approx(3));
  CHECK(transfer_parallelism(4, 3) == doctest::Approx(4));  // cuts at 1/4 1/3 1/2 2/3 3/4: largest a quarter
  CHECK_THROWS_AS(transfer_parallelism(0, 2), InvariantError);
}

TEST_CASE("latency and bandwidth add up: 64 MiB over 100 Mbit/s and 50 ms") {
  LinkDirection d(7, {.burst_bytes = 0});
  const double due = d.arrival(2, 64u << 20, WanLink{.latency_ms = 50, .bandwidth_mbps = 100});
  CHECK(due - 2 == doctest::Approx(0.05 + 67108864.0 * 8 / 100e6));  // 5.419 s
}

TEST_CASE("jitter: each distribution keeps its bounds, its centre and its spread") {
  const int n = 20000;
  SUBCASE("normal: sd jitter_ms around the latency") {
    const auto s = stats_of(latencies_ms({.latency_ms = 50, .jitter_ms = 2, .jitter = WanLink::Jitter::Normal}, n));
    CHECK(s.mean == doctest::Approx(50).epsilon(0.005));
    CHECK(s.sd == doctest::Approx(2).epsilon(0.05));
  }
  SUBCASE("normal: never below zero however wide") {
    const auto s = stats_of(latencies_ms({.latency_ms = 1, .jitter_ms = 5, .jitter = WanLink::Jitter::Normal}, n));
    CHECK(s.min == 0);  // clipped, and clipping happens
    CHECK(s.max > 10);
  }
  SUBCASE("uniform: within latency +- jitter_ms, reaching both ends") {
    const auto s = stats_of(latencies_ms({.latency_ms = 50, .jitter_ms = 4, .jitter = WanLink::Jitter::Uniform}, n));
    CHECK(s.min >= 46);
    CHECK(s.max <= 54);
    CHECK(s.min < 46.1);
    CHECK(s.max > 53.9);
    CHECK(s.mean == doctest::Approx(50).epsilon(0.005));
    CHECK(s.sd == doctest::Approx(4 / std::sqrt(3.0)).epsilon(0.05));
  }
  SUBCASE("pareto: never below the latency, mean jitter_ms above it, a heavy tail") {
    const auto xs = latencies_ms({.latency_ms = 50, .jitter_ms = 2, .jitter = WanLink::Jitter::Pareto}, n);
    const auto s = stats_of(xs);
    CHECK(s.min >= 50);
    CHECK(s.mean - 50 == doctest::Approx(2).epsilon(0.05));
    // Most draws are below the mean extra delay; a few are many times it.
    CHECK(std::count_if(xs.begin(), xs.end(), [](double x) { return x - 50 < 2; }) > n * 0.6);
    CHECK(s.max - 50 > 10 * 2);
  }
  SUBCASE("no jitter: the latency exactly") {
    const auto s = stats_of(latencies_ms({.latency_ms = 35}, 100));
    CHECK((s.min == 35 && s.max == 35));
  }
}

TEST_CASE("jitter never reorders a direction: arrivals are FIFO") {
  LinkDirection d(3);
  const WanLink link{.latency_ms = 10, .jitter_ms = 8, .jitter = WanLink::Jitter::Uniform};
  double last = 0;
  int held_back = 0;
  for (int i = 0; i < 1000; ++i) {
    const double due = d.arrival(i * 0.001, 100, link);  // 1 ms apart: jitter alone would reorder many
    CHECK(due >= last);
    held_back += due == last ? 1 : 0;  // due with the one before it, not at its own draw
    last = due;
  }
  CHECK(held_back > 100);
}

TEST_CASE("loss: each lost packet costs one round trip") {
  const WanLink link{.latency_ms = 50, .loss = 0.01};
  std::mt19937_64 rng(5);
  // 1,500,000 bytes = 1,000 packets: 10 lost on average, 0.1 s each.
  std::vector<double> delays;
  for (int i = 0; i < 2000; ++i) delays.push_back(draw_loss_delay_s(link, 1'500'000, 1500, rng));
  const auto s = stats_of(delays);
  CHECK(s.mean == doctest::Approx(1.0).epsilon(0.03));
  for (double d : delays) CHECK(std::abs(d / 0.1 - std::round(d / 0.1)) < 1e-6);  // whole round trips
  CHECK(draw_loss_delay_s({.latency_ms = 50}, 1'500'000, 1500, rng) == 0);
  // Through the direction: the loss delay comes on top of latency and bandwidth.
  LinkDirection lossless(9, {.burst_bytes = 0}), lossy(9, {.burst_bytes = 0});
  const double base = lossless.arrival(0, 1'500'000, {.latency_ms = 50, .bandwidth_mbps = 100});
  CHECK(lossy.arrival(0, 1'500'000, {.latency_ms = 50, .bandwidth_mbps = 100, .loss = 0.01}) > base);
}

TEST_CASE("the same seed gives the same arrivals") {
  const WanLink link{.latency_ms = 20, .jitter_ms = 3, .jitter = WanLink::Jitter::Pareto, .bandwidth_mbps = 50,
                     .loss = 0.001};
  LinkDirection a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const double x = a.arrival(i * 0.01, 100'000, link);
    CHECK(x == b.arrival(i * 0.01, 100'000, link));
    differs = differs || x != c.arrival(i * 0.01, 100'000, link);
  }
  CHECK(differs);
}
