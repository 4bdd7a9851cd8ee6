#pragma once
// Whether `meridian launch` starts a dead site again, and when: a pure function of how it ended and
// how often it was restarted already, so the policy is tested without processes or a clock.
#include <string>

#include "core/config/job_config.hpp"
#include "sites/site/process.hpp"

namespace meridian {

struct SiteRestartPolicy {
  int max_restarts = 3;
  double backoff_s = 1;        // before the first restart; doubled for each one after it
  double max_backoff_s = 30;
};

// From [launch].
SiteRestartPolicy site_restart_policy(const JobConfig& config);

struct SiteRestart {
  bool restart = false;
  double delay_s = 0;  // when restart: how long after the exit
  std::string why_not;  // when not: why, for the operator
};

// After a site's process ended with `status` (not a success), having been restarted `restarts`
// times already. Never restarted: an exit that says the input is at fault (error.hpp's permanent
// codes), or once max_restarts is spent. Otherwise after backoff_s * 2^restarts, capped.
SiteRestart decide_site_restart(const ExitStatus& status, int restarts, const SiteRestartPolicy& policy);

}  // namespace meridian
