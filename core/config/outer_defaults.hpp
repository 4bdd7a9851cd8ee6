#pragma once
// The outer optimizer of a DiLoCo job follows the job's shape: how many sites M merge each version
// and how many inner steps H each delta spans (Nesterov momentum 0.75, ramped up from 0 over the
// outer steps of the first kMomentumWarmupInnerSteps inner steps; lr 1.0 from H = 40 on, 0.8
// below, 1.2x that from 8 sites on). Where the job file leaves [outer] lr, momentum or
// momentum_warmup out, the resolver takes these (an explicit setting always wins) and `meridian
// validate` says so. The sweeps behind them: docs/quality.md.
#include <string>

namespace meridian {

struct OuterDefaults {
  double lr = 0.7;
  double momentum = 0.9;
  int momentum_warmup = 0;  // outer steps
  std::string why;  // one line for `meridian validate`
};

// Pure: sites >= 1, inner_steps >= 1 (a caller's bug otherwise). `sparse`: the job's deltas go
// through the sparse codec, whose mean of the sites' few kept entries calls for a longer step.
// `early_inner_steps`, `early_steps`: the job's shorter first rounds ([outer], 0: none), which the
// momentum's ramp counts in outer steps as they come.
OuterDefaults outer_defaults(int sites, int inner_steps, bool sparse = false, int early_inner_steps = 0,
                             int early_steps = 0);

// The steep start of a job's loss curve, in inner steps: the derived momentum ramps up over the
// outer steps that span it (5 at H = 50).
inline constexpr int kMomentumWarmupInnerSteps = 250;

// What a sparse job's density is derived from where the job file leaves it out: the bytes a round
// may send per parameter (docs/quality.md, "The sparse codec at 0.1 byte a parameter").
inline constexpr double kSparseBytesPerValue = 0.1;

// How many steps an overlapping site trains past a round's end before it waits for that round's
// commit, where the job file does not say: a tenth of the round, at least one.
int overlap_steps_default(int inner_steps);

}  // namespace meridian
