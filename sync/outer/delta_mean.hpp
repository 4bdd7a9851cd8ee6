#pragma once
// Steps 4-5 of a round (DESIGN.md): the commit lists the deltas it merges, each with a weight,
// and every site forms their weighted mean. Every site must get the same bits, so the sum runs
// over the deltas in the listed order, in double, rounded to float once per element.
//
// Deltas are pseudo-gradients: delta = global_base - local, pointing like a gradient.
#include <cstdint>
#include <span>

namespace meridian {

// out[j] = sum_i w_i * deltas[i][j] / sum_i w_i, summed over i in the given order.
// Error(Data) -- and `out` left untouched -- when the sizes disagree, a weight is negative or
// non-finite, all weights are zero, or any delta value is non-finite (naming the delta and the
// element): a corrupted delta is never applied.
void weighted_mean(std::span<const std::span<const float>> deltas, std::span<const double> weights,
                   std::span<float> out);

// Eager updates (Kale, Douillard, Donchev 2025, "Eager updates for overlapped communication and
// computation in DiLoCo", arXiv 2502.12996): a site that overlaps its rounds does not wait for the
// mean of the round it just sent. It estimates that mean from its own fresh delta, weighed by its
// share of the tokens, and the other sites' latest deltas (their mean in the newest commit) as the
// proxy for theirs: out = share * fresh + (1 - share) * others_scale * others. The proxy is a
// round old, and early in a run deltas shrink several-fold from one round to the next: taken as
// it is, it overshoots (a loss spike of +35% at the demo's second round). `others_scale` is how
// much this site's own delta changed since that round (the ratio of their norms), which the
// others' changed by too, up to noise. With no others known (`others` empty) the fresh delta
// stands for everyone's. InvariantError when the sizes disagree, share is not in (0, 1] or
// others_scale is negative or not finite.
void eager_estimate(std::span<const float> fresh, std::span<const float> others, double share, double others_scale,
                    std::span<float> out);

enum class StalenessDecay {
  Inverse,   // 1 / (1 + staleness): a late delta was computed from older weights, so it counts less
  Constant,  // 1: every delta within max_staleness counts by its tokens alone
};

struct StalenessOptions {
  StalenessDecay decay = StalenessDecay::Inverse;
  // Deltas more versions behind than this are dropped (weight 0): applying a very old
  // pseudo-gradient to much newer weights hurts more than it helps.
  std::int64_t max_staleness = 4;
};

// The weight of a delta made from `tokens` tokens against a base `staleness` versions older than
// the version being committed: tokens * decay(staleness), or 0 beyond max_staleness. Pure, so
// every site derives the same weight from the same announcement. Error(Data) when tokens or
// staleness is negative.
double staleness_weight(std::int64_t tokens, std::int64_t staleness, const StalenessOptions& options = {});

}  // namespace meridian
