#pragma once
// Dynamic local updates (Liu et al. 2024, "Asynchronous Local-SGD Training for Language
// Modeling", DyLU): a slower site runs fewer inner steps per round, so every site's round takes
// about the same wall time and a slow site's delta is not always the stalest one.
namespace meridian {

// The inner steps a site of speed `speed_site` runs per round when a site of speed `speed_ref`
// runs H: max(1, floor(speed_site / speed_ref * H)). speed_ref is meant to be the fastest site's
// speed, so the result is at most H; a faster site gets proportionally more. A quotient within
// 1e-9 (relative) of an integer counts as that integer, so 0.3 / 0.1 * 10 gives 30, not the 29
// its binary rounding would floor to. Pure: every site derives every site's H alike.
// Error(Config) when a speed is not finite and > 0, H < 1, or the result exceeds an int.
int local_steps(double speed_site, double speed_ref, int H);

}  // namespace meridian
