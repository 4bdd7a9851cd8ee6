#include "core/config/outer_defaults.hpp"

#include <algorithm>
#include <sstream>

#include "core/util/error.hpp"

namespace meridian {

OuterDefaults outer_defaults(int sites, int inner_steps) {
  MERIDIAN_CHECK(sites >= 1 && inner_steps >= 1, "sites=", sites, " inner_steps=", inner_steps);
  // The best outer learning rate rises with the sites a version averages (their mean delta is less
  // noisy, so a longer step along it pays) and with H, and does not depend on the model's size
  // (Charles et al. 2025, "Communication-efficient language model training scales reliably and
  // robustly", at H = 30: about 0.4 for one site, 0.6 for 2-4, 0.8 for 8). At H = 50 with 3 sites
  // 0.7 beat 0.6 by 0.8% here (docs/quality.md): a tenth more from H = 50 on.
  OuterDefaults d;
  d.lr = (sites <= 1 ? 0.4 : sites <= 4 ? 0.6 : 0.8) + (inner_steps >= 50 ? 0.1 : 0.0);
  d.momentum = 0.9;
  std::ostringstream why;
  why << sites << " sites, H = " << inner_steps;
  d.why = why.str();
  return d;
}

int overlap_steps_default(int inner_steps) {
  MERIDIAN_CHECK(inner_steps >= 1, "inner_steps=", inner_steps);
  // Every step trained past a round's end builds on weights the commit then moves; the rebase
  // keeps that progress, but it was computed at a stale point. Left unbounded, sites sharing
  // machines drift apart by half a round and more, and the demo lost 3-5 points to it
  // (docs/quality.md). A tenth of the round still hides a commit that takes that long.
  return std::max(1, inner_steps / 10);
}

}  // namespace meridian
