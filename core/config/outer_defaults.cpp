#include "core/config/outer_defaults.hpp"

#include <algorithm>
#include <sstream>

#include "core/util/error.hpp"

namespace meridian {

OuterDefaults outer_defaults(int sites, int inner_steps, bool sparse, int early_inner_steps, int early_steps) {
  MERIDIAN_CHECK(sites >= 1 && inner_steps >= 1 && early_inner_steps >= 0 && early_steps >= 0, "sites=", sites,
                 " inner_steps=", inner_steps, " early_inner_steps=", early_inner_steps, " early_steps=", early_steps);
  // Measured in lockstep against the synchronous twin at its best inner lr (docs/quality.md, "The
  // outer momentum, and a bound on the overlap", "Where the gap comes from, and a momentum that
  // ramps up", "The sparse codec at 0.1 byte a parameter"). In a job of tens of rounds the first
  // deltas (the model leaving its random start) shrink several-fold from round to round, so the
  // momentum ramps up over the first kMomentumWarmupInnerSteps inner steps and then 0.75 pays.
  // The outer lr: 1.0 from H = 40, 0.8 below (at the demo's length 0.8 won at H = 25, 30 and 35,
  // 1.0 at H = 40, on the mean of both corpora: "The outer lr between H = 25 and 40"); x1.2 from 8
  // sites (Charles et al. found it rises with the sites); x1.5 for the sparse codec, whose mean
  // carries each entry from few sites and whose unsent entries wait in the weights
  // (OuterState::rebase).
  OuterDefaults d;
  // Shorter early rounds take the lr of their H: against uniform rounds (docs/quality.md, "Shorter
  // rounds first") the schedule measured better at 0.8 than at 1.0 on the mean over both corpora.
  const int shortest = early_inner_steps > 0 ? std::min(inner_steps, early_inner_steps) : inner_steps;
  d.lr = (shortest >= 40 ? 1.0 : 0.8) * (sites >= 8 ? 1.2 : 1.0) * (sparse ? 1.5 : 1.0);
  d.momentum = 0.75;
  const int early = early_inner_steps > 0 ? std::min(kMomentumWarmupInnerSteps, early_steps) : 0;
  const int late = kMomentumWarmupInnerSteps - early;
  d.momentum_warmup =
      (early > 0 ? (early + early_inner_steps - 1) / early_inner_steps : 0) + (late + inner_steps - 1) / inner_steps;
  std::ostringstream why;
  why << sites << " sites, H = " << inner_steps << (sparse ? ", sparse codec" : "");
  if (early_inner_steps > 0) why << " after " << early_steps << " steps of H = " << early_inner_steps;
  d.why = why.str();
  return d;
}

int overlap_steps_default(int inner_steps) {
  MERIDIAN_CHECK(inner_steps >= 1, "inner_steps=", inner_steps);
  // Every step trained past a round's end builds on weights the commit then moves; the rebase
  // keeps that progress, but it was computed at a stale point. Left unbounded, sites sharing a
  // machine drift apart by half a round and more (docs/quality.md). A tenth of the round still
  // hides a commit that takes that long.
  return std::max(1, inner_steps / 10);
}

}  // namespace meridian
