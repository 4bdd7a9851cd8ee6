#include "sites/launch/site_restarts.hpp"

#include <algorithm>
#include <cmath>

namespace meridian {

SiteRestartPolicy site_restart_policy(const JobConfig& config) {
  SiteRestartPolicy p;
  p.max_restarts = config.launch.max_site_restarts;
  p.backoff_s = config.launch.restart_backoff_ms / 1000.0;
  return p;
}

SiteRestart decide_site_restart(const ExitStatus& status, const SiteHistory& history, double ran_s,
                                const SiteRestartPolicy& policy) {
  if (status.permanent())
    return {false, 0, describe(status) + " says its input is at fault: starting it again would fail the same way"};
  if (history.restarts >= policy.max_restarts)
    return {false, 0,
            "it failed " + std::to_string(history.restarts + 1) + " time(s), launch.max_site_restarts = " +
                std::to_string(policy.max_restarts)};
  const int before = ran_s >= policy.healthy_s ? 0 : history.crash_loop;
  const double delay = policy.backoff_s * std::ldexp(1.0, std::min(before, 30));
  return {true, std::min(delay, policy.max_backoff_s), "", before + 1};
}

}  // namespace meridian
