#include "core/config/outer_defaults.hpp"

#include <algorithm>
#include <sstream>

#include "core/util/error.hpp"

namespace meridian {

OuterDefaults outer_defaults(int sites, int inner_steps, bool sparse) {
  MERIDIAN_CHECK(sites >= 1 && inner_steps >= 1, "sites=", sites, " inner_steps=", inner_steps);
  // Measured, lockstep, the QUALITY job at its synchronous twin's best inner lr (docs/quality.md,
  // "The outer optimizer, swept" and "Fifth session"). Nesterov momentum 0.6 beat 0.9 at every
  // shape tried (2, 3, 4 and 8 sites, H = 20, 50 and 100) and on the demo's 2,000 steps; with it an
  // outer lr of 1.0 was best at H = 50 and 100 (1.2 no better, 1.5 diverged) and 0.8 at H = 20. The
  // papers' 0.9 comes from runs of thousands of rounds; in a job of tens of rounds the first deltas,
  // the model leaving its random start, shrink several-fold from one round to the next, and a
  // momentum built on them drags the weights along a stale direction. Ramping the momentum up from
  // 0 over the outer steps of the first kMomentumWarmupInnerSteps inner steps (5 at H = 50) removes
  // most of that drag, and a higher momentum (0.75) then pays: 1.1% lower loss at 3 sites, 1.4% at
  // 4, 3.8% at 8, 1.1% on Gutenberg, 1.4% on the demo; at H = 100 (a job of 6 rounds) neither
  // helped nor hurt. The outer lr rises with the number of sites, as Charles et al. found: at 8
  // sites 1.2 beat 1.0 by 1.0% (1.5: +7.3%), at 3 and 4 it lost (+0.2%, +0.2%); 5 to 7 sites
  // were not measured and keep 1.0.
  // Sparse: each site sends its own few entries, so the sites' mean carries a third of most of
  // them (3 sites), and what a site has not sent waits in its weights (OuterState::rebase). A
  // longer step along that mean measured better: 1.5 x the dense lr at 3 sites, H = 50 (against
  // it, 1.2: +0.9%, 1.8: +0.5%; 1.0: +2.0% in an earlier variant); other shapes were not swept.
  OuterDefaults d;
  d.lr = (inner_steps >= 50 ? 1.0 : 0.8) * (sites >= 8 ? 1.2 : 1.0) * (sparse ? 1.5 : 1.0);
  d.momentum = 0.75;
  d.momentum_warmup = (kMomentumWarmupInnerSteps + inner_steps - 1) / inner_steps;
  std::ostringstream why;
  why << sites << " sites, H = " << inner_steps << (sparse ? ", sparse codec" : "");
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
