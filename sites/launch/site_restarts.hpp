#pragma once
// Whether `meridian launch` starts a dead site again, and when: a pure function of how it ended and
// how often it was restarted already, so the policy is tested without processes or a clock.
#include <string>

#include "core/config/job_config.hpp"
#include "sites/site/process.hpp"

namespace meridian {

struct SiteRestartPolicy {
  int max_restarts = 3;
  double backoff_s = 1;        // before a restart; doubled for each failure in a row of a crash loop
  double max_backoff_s = 30;
  // A site that ran this long before it died was not crash-looping: it is started again after
  // backoff_s, however often it failed before (a site killed once a minute lost 30 s a time to a
  // backoff that only grew, in the second soak).
  double healthy_s = 30;
};

// From [launch].
SiteRestartPolicy site_restart_policy(const JobConfig& config);

struct SiteRestart {
  bool restart = false;
  double delay_s = 0;  // when restart: how long after the exit
  std::string why_not;  // when not: why, for the operator
  int crash_loop = 0;  // failures in a row after runs shorter than healthy_s, this one included
};

// What a site's runs so far say: restarts over the launch, and the crash loop it is in.
struct SiteHistory {
  int restarts = 0;
  int crash_loop = 0;  // the last decision's
};

// After a site's process ended with `status` (not a success) after running `ran_s`. Never
// restarted: an exit that says the input is at fault (error.hpp's permanent codes), or once
// max_restarts is spent. Otherwise after backoff_s * 2^(failures in a row of short runs before
// this one), capped: a site that ran healthy_s or longer starts a new count.
SiteRestart decide_site_restart(const ExitStatus& status, const SiteHistory& history, double ran_s,
                                const SiteRestartPolicy& policy);

}  // namespace meridian
