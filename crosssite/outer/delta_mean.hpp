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
// mean of the round it just sent. Its outer step there takes its own fresh delta at its share of
// the round's tokens, and the other sites' deltas one round late. Those of the round before are
// in the version the site holds (their commit came while it trained), so this round's estimate is
// out = share * fresh: the others count as zero until the round's commit brings their deltas. (An
// earlier rule added the others' latest mean again as a proxy for their fresh deltas: that
// counted their previous round twice, and measured worse; docs/quality.md.)
// InvariantError when the sizes disagree or share is not in (0, 1].
void eager_estimate(std::span<const float> fresh, double share, std::span<float> out);

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
