#include "sim/des/timeline_recorder.hpp"

#include <cmath>

#include "core/util/error.hpp"

namespace meridian::sim {

std::string_view to_string(Phase p) {
  switch (p) {
    case Phase::Compute: return "compute";
    case Phase::Wait: return "wait";
    case Phase::Down: return "down";
    case Phase::Overhead: return "overhead";
  }
  return "?";
}

void TimelineRecorder::emit(int s, double t0, double t1, Phase phase) {
  if (!(t1 > t0)) return;
  Site& site = sites_[s];
  // A gap or an overlap would make the totals disagree with the wall time.
  MERIDIAN_CHECK(std::abs(t0 - site.end) <= 1e-9 * std::max(1.0, site.end), "site ", s, " segment from ", t0,
                 " but its record ends at ", site.end);
  site.totals[static_cast<int>(phase)] += t1 - t0;
  if (!site.segments.empty() && site.segments.back().phase == phase) site.segments.back().t1 = t1;
  else site.segments.push_back({site.end, t1, phase});
  site.end = t1;
}

void TimelineRecorder::take(int s, SiteResult& out) {
  Site& site = sites_[s];
  out.compute_s = site.totals[static_cast<int>(Phase::Compute)];
  out.wait_s = site.totals[static_cast<int>(Phase::Wait)];
  out.down_s = site.totals[static_cast<int>(Phase::Down)];
  out.overhead_s = site.totals[static_cast<int>(Phase::Overhead)];
  out.timeline = std::move(site.segments);
}

}  // namespace meridian::sim
