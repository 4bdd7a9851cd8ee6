#include "sim/report/comparison.hpp"

#include <algorithm>
#include <cstdio>

namespace meridian::sim {

namespace {
std::string format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}
}  // namespace

std::string human_seconds(double s) {
  // A small job on an accelerator's simulated speed ends in milliseconds: "0.0 s" would hide it.
  if (s < 1e-3) return format("%.0f us", s * 1e6);
  if (s < 1) return format("%.0f ms", s * 1e3);
  if (s < 120) return format("%.1f s", s);
  if (s < 2 * 3600) return format("%.1f min", s / 60);
  if (s < 2 * 86400) return format("%.2f h", s / 3600);
  return format("%.2f d", s / 86400);
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (b >= 1000 && u < 5) b /= 1000, ++u;
  return u == 0 ? format("%.0f B", b) : format("%.2f ", b) + units[u];
}

std::string comparison_table(const std::vector<Result>& results) {
  std::string out =
      "| algorithm | compute utilization | goodput | wall time | tokens | WAN bytes | versions | mean staleness | "
      "dropped deltas | failures (replica/site) |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : results) {
    int replica = 0, site = 0;
    for (const auto& s : r.sites) replica += s.replica_failures, site += s.site_failures;
    out += "| " + std::string(to_string(r.algorithm)) + " | " + format("%.1f%%", 100 * r.compute_utilization) +
           " | " + format("%.1f%%", 100 * r.goodput) + " | " + human_seconds(r.wall_s) + " | " + format("%.4g", r.tokens) + " | " + human_bytes(r.wan_bytes) +
           " | " + std::to_string(r.versions) + " | " + format("%.2f", r.mean_staleness) + " | " +
           std::to_string(r.deltas_dropped) + " | " + std::to_string(replica) + "/" + std::to_string(site) + " |\n";
  }
  return out;
}

nlohmann::json to_json(const Result& r) {
  nlohmann::json sites = nlohmann::json::array();
  for (const auto& s : r.sites)
    sites.push_back({{"site", s.name},
                     {"compute_utilization", s.utilization()},
                     {"compute_s", s.compute_s},
                     {"wait_s", s.wait_s},
                     {"down_s", s.down_s},
                     {"overhead_s", s.overhead_s},
                     {"useful_s", s.useful_s},
                     {"end_s", s.end_s},
                     {"steps", s.steps},
                     {"rounds", s.rounds},
                     {"replica_failures", s.replica_failures},
                     {"site_failures", s.site_failures}});
  return {{"algorithm", to_string(r.algorithm)},
          {"compute_utilization", r.compute_utilization},
          {"goodput", r.goodput},
          {"wall_s", r.wall_s},
          {"tokens", r.tokens},
          {"budget_reached", r.budget_reached},
          {"wan_bytes", r.wan_bytes},
          {"versions", r.versions},
          {"deltas_merged", r.deltas_merged},
          {"deltas_dropped", r.deltas_dropped},
          {"mean_staleness", r.mean_staleness},
          {"events", r.events},
          {"sites", sites}};
}

std::vector<Bin> bin_timeline(const SiteResult& site, double wall_s, int bins) {
  std::vector<Bin> out(static_cast<std::size_t>(std::max(1, bins)));
  const double width = wall_s / static_cast<double>(out.size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i].t0 = width * i, out[i].t1 = width * (i + 1);
  if (width <= 0) return out;
  for (const auto& seg : site.timeline) {
    // Segments are sorted and bins equal: walk the bins a segment covers.
    auto first = static_cast<std::size_t>(std::max(0.0, seg.t0 / width));
    for (std::size_t i = first; i < out.size() && out[i].t0 < seg.t1; ++i) {
      const double overlap = std::min(seg.t1, out[i].t1) - std::max(seg.t0, out[i].t0);
      if (overlap > 0) out[i].share[static_cast<int>(seg.phase)] += overlap / width;
    }
  }
  return out;
}

}  // namespace meridian::sim
