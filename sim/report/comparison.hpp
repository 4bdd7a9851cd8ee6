#pragma once
// What `meridian sim` writes: the algorithms side by side (a Markdown table), and each run's
// figures as JSON (per site, with a binned timeline) for scripts and the calibration check.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/des/result.hpp"

namespace meridian::sim {

// "41.0 s", "3.20 h", "2.10 d"
std::string human_seconds(double s);
// "512 B", "1.50 GB" (powers of 1000)
std::string human_bytes(double b);

// One row per result: utilization, goodput, wall time, tokens, WAN bytes, versions, staleness.
std::string comparison_table(const std::vector<Result>& results);

// The job-level figures and each site's totals.
nlohmann::json to_json(const Result& r);

// Each site's time in `bins` equal bins over [0, wall_s]: the share of each phase per bin.
struct Bin {
  double t0 = 0, t1 = 0;
  double share[4] = {0, 0, 0, 0};  // by Phase
};
std::vector<Bin> bin_timeline(const SiteResult& site, double wall_s, int bins);

}  // namespace meridian::sim
