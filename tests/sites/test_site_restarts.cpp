// decide_site_restart: when `meridian launch` starts a dead site again (site_restarts.hpp).
#include <doctest/doctest.h>

#include <signal.h>

#include <vector>

#include "core/config/job_config.hpp"
#include "sites/launch/site_restarts.hpp"

using namespace meridian;

namespace {

// Runs `ran_s` long each, failing: the delays the launcher waits before each restart.
std::vector<double> delays(const SiteRestartPolicy& policy, const std::vector<double>& runs) {
  SiteHistory history;
  std::vector<double> out;
  for (const double ran_s : runs) {
    const auto d = decide_site_restart({0, SIGKILL, ""}, history, ran_s, policy);
    REQUIRE(d.restart);
    out.push_back(d.delay_s);
    history.crash_loop = d.crash_loop;
    ++history.restarts;
  }
  return out;
}

}  // namespace

TEST_CASE("a site in a crash loop is restarted after a backoff that doubles, up to the limit") {
  const SiteRestartPolicy policy{.max_restarts = 3, .backoff_s = 0.5, .max_backoff_s = 30};
  CHECK(delays(policy, {2, 2, 2}) == std::vector<double>{0.5, 1.0, 2.0});
  const auto spent = decide_site_restart({0, SIGKILL, ""}, {3, 3}, 2, policy);
  CHECK_FALSE(spent.restart);
  CHECK(spent.why_not == "it failed 4 time(s), launch.max_site_restarts = 3");
  // A peer or network failure (exit 1) and a bug (70) may pass: restarted too.
  CHECK(decide_site_restart({1, 0, ""}, {}, 2, policy).restart);
  CHECK(decide_site_restart({70, 0, ""}, {}, 2, policy).restart);
}

// The second soak: sites killed about once a minute waited 1, 2, 4, 8, 16, then 30 s to restart.
TEST_CASE("a site that ran healthy_s before it died is restarted after the first backoff, and a new loop counts from there") {
  const SiteRestartPolicy policy{.max_restarts = 100, .backoff_s = 1, .max_backoff_s = 30, .healthy_s = 30};
  CHECK(delays(policy, {60, 65, 55, 70, 60, 58}) == std::vector<double>{1, 1, 1, 1, 1, 1});
  CHECK(delays(policy, {60, 5, 5, 5, 40, 5}) == std::vector<double>{1, 2, 4, 8, 1, 2});
  CHECK(delays(policy, {29.9, 30}) == std::vector<double>{1, 1});
}

TEST_CASE("the backoff stops growing at its ceiling, however many restarts are allowed") {
  const SiteRestartPolicy policy{.max_restarts = 1000, .backoff_s = 1, .max_backoff_s = 30};
  CHECK(decide_site_restart({1, 0, ""}, {5, 5}, 1, policy).delay_s == doctest::Approx(30));
  CHECK(decide_site_restart({1, 0, ""}, {999, 999}, 1, policy).delay_s == doctest::Approx(30));
}

TEST_CASE("a site whose input is at fault is never restarted, whatever the budget") {
  const SiteRestartPolicy policy{.max_restarts = 10, .backoff_s = 1, .max_backoff_s = 30};
  for (const int code : {65, 66, 78, 2}) {
    const auto d = decide_site_restart({code, 0, "meridian: data error: x"}, {}, 1, policy);
    INFO(code);
    CHECK_FALSE(d.restart);
    CHECK(d.why_not.find("says its input is at fault") != std::string::npos);
  }
  CHECK(decide_site_restart({65, 0, ""}, {}, 1, policy).why_not ==
        "exit code 65 (data error) says its input is at fault: starting it again would fail the same way");
}

TEST_CASE("the policy comes from [launch]") {
  JobConfig config;
  config.launch.max_site_restarts = 5;
  config.launch.restart_backoff_ms = 250;
  const auto p = site_restart_policy(config);
  CHECK(p.max_restarts == 5);
  CHECK(p.backoff_s == doctest::Approx(0.25));
}
