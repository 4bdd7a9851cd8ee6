#include <doctest/doctest.h>

#include <cmath>

#include "sim/des/failure_process.hpp"

using namespace meridian;
using namespace meridian::sim;

namespace {

struct Counter : FailureSink {
  std::vector<int> replica, site;
  explicit Counter(int n) : replica(n), site(n) {}
  void replica_failure(int s, double) override { ++replica[s]; }
  void site_failure(int s, double, double) override { ++site[s]; }
};

Scenario two_sites() {
  Scenario sc;
  sc.sites = {{.name = "a", .gpus = 1000}, {.name = "b", .gpus = 10}};
  sc.failures = {{.name = "gpu", .per_gpu_s = 1e-6, .recovery_s = 60},
                 {.name = "power", .whole_site = true, .per_gpu_s = 1e-7, .recovery_s = 3600}};
  return sc;
}

// Delivers every failure up to `horizon`; returns their times.
std::vector<double> drain(const Scenario& sc, Counter& c, double horizon) {
  EventQueue q;
  FailureProcess f(sc, q, 0);
  std::vector<double> times;
  while (!q.empty()) {
    const Event e = q.pop();
    if (e.t > horizon) break;
    times.push_back(e.t);
    f.strike(e, c);
  }
  return times;
}

}  // namespace

TEST_CASE("failures arrive at rate x GPUs per class and site, the same times for the same seed") {
  const Scenario sc = two_sites();
  EventQueue q;
  const FailureProcess f(sc, q, 0);
  CHECK(f.rate(0, 0) == doctest::Approx(1e-3));
  CHECK(f.rate(1, 1) == doctest::Approx(1e-6));
  Counter c(2);
  constexpr double horizon = 1e6;
  const auto times = drain(sc, c, horizon);
  // Poisson counts: mean lambda * T, standard deviation sqrt of it; 5 sigma bounds.
  const auto near = [](int count, double mean) { return std::abs(count - mean) < 5 * std::sqrt(mean) + 1; };
  CHECK(near(c.replica[0], 1000));
  CHECK(near(c.replica[1], 10));
  CHECK(near(c.site[0], 100));
  CHECK(near(c.site[1], 1));
  Counter again(2);
  CHECK(drain(sc, again, horizon) == times);
}

TEST_CASE("outages strike at their time, once") {
  Scenario sc = two_sites();
  sc.failures.clear();
  sc.outages = {{.site = 1, .at_s = 50, .whole_site = true, .recovery_s = 10}, {.site = 0, .at_s = 20}};
  Counter c(2);
  CHECK(drain(sc, c, 1e9) == std::vector<double>{20, 50});
  CHECK(c.replica == std::vector<int>{1, 0});
  CHECK(c.site == std::vector<int>{0, 1});
}
