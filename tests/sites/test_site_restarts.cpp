// decide_site_restart: when `meridian launch` starts a dead site again (site_restarts.hpp).
#include <doctest/doctest.h>

#include <signal.h>

#include "core/config/job_config.hpp"
#include "sites/launch/site_restarts.hpp"

using namespace meridian;

TEST_CASE("a crashed or killed site is restarted after a backoff that doubles, up to the limit") {
  const SiteRestartPolicy policy{.max_restarts = 3, .backoff_s = 0.5, .max_backoff_s = 30};
  const ExitStatus killed{0, SIGKILL, ""};
  const double expected[] = {0.5, 1.0, 2.0};
  for (int restarts = 0; restarts < 3; ++restarts) {
    const auto d = decide_site_restart(killed, restarts, policy);
    CHECK(d.restart);
    CHECK(d.delay_s == doctest::Approx(expected[restarts]));
  }
  const auto spent = decide_site_restart(killed, 3, policy);
  CHECK_FALSE(spent.restart);
  CHECK(spent.why_not == "it failed 4 time(s), launch.max_site_restarts = 3");
  // A peer or network failure (exit 1) and a bug (70) may pass: restarted too.
  CHECK(decide_site_restart({1, 0, ""}, 0, policy).restart);
  CHECK(decide_site_restart({70, 0, ""}, 0, policy).restart);
}

TEST_CASE("the backoff stops growing at its ceiling, however many restarts are allowed") {
  const SiteRestartPolicy policy{.max_restarts = 1000, .backoff_s = 1, .max_backoff_s = 30};
  CHECK(decide_site_restart({1, 0, ""}, 5, policy).delay_s == doctest::Approx(30));
  CHECK(decide_site_restart({1, 0, ""}, 999, policy).delay_s == doctest::Approx(30));
}

TEST_CASE("a site whose input is at fault is never restarted, whatever the budget") {
  const SiteRestartPolicy policy{.max_restarts = 10, .backoff_s = 1, .max_backoff_s = 30};
  for (const int code : {65, 66, 78, 2}) {
    const auto d = decide_site_restart({code, 0, "meridian: data error: x"}, 0, policy);
    INFO(code);
    CHECK_FALSE(d.restart);
    CHECK(d.why_not.find("says its input is at fault") != std::string::npos);
  }
  CHECK(decide_site_restart({65, 0, ""}, 0, policy).why_not ==
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
