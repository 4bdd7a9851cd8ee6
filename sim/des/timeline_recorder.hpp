#pragma once
// Each site's time as contiguous segments (adjacent ones of one phase merged) and the totals per
// phase, filled in by the engine as the simulation advances.
#include <vector>

#include "sim/des/result.hpp"

namespace meridian::sim {

class TimelineRecorder {
 public:
  explicit TimelineRecorder(int sites) : sites_(sites) {}
  // [t0, t1) of `phase` at site s; empty spans are ignored. t0 must be where the site's record ends.
  void emit(int s, double t0, double t1, Phase phase);
  double end(int s) const { return sites_[s].end; }
  // Moves the segments and totals into `out`.
  void take(int s, SiteResult& out);

 private:
  struct Site {
    std::vector<Segment> segments;
    double totals[4] = {0, 0, 0, 0};
    double end = 0;
  };
  std::vector<Site> sites_;
};

}  // namespace meridian::sim
