#include "crosssite/outer/delta_mean.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "core/util/error.hpp"

namespace meridian {

namespace {

void validate(std::span<const std::span<const float>> deltas, std::span<const double> weights,
              std::size_t n) {
  if (deltas.size() != weights.size())
    throw make_error(ErrorKind::Data, "weighted mean: ", deltas.size(), " deltas but ", weights.size(),
                     " weights");
  for (std::size_t i = 0; i < deltas.size(); ++i) {
    if (deltas[i].size() != n)
      throw make_error(ErrorKind::Data, "weighted mean: delta ", i, " has ", deltas[i].size(),
                       " values, expected ", n);
    if (!std::isfinite(weights[i]) || weights[i] < 0)
      throw make_error(ErrorKind::Data, "weighted mean: weight ", i, " is ", weights[i],
                       " (must be finite and >= 0)");
  }
  // Checked before anything is written, so a bad delta cannot leave a half-merged result behind.
  for (std::size_t i = 0; i < deltas.size(); ++i) {
    const auto bad = std::find_if(deltas[i].begin(), deltas[i].end(), [](float x) { return !std::isfinite(x); });
    if (bad != deltas[i].end())
      throw make_error(ErrorKind::Data, "weighted mean: delta ", i, " has non-finite value ", *bad,
                       " at index ", bad - deltas[i].begin());
  }
}

}  // namespace

void weighted_mean(std::span<const std::span<const float>> deltas, std::span<const double> weights,
                   std::span<float> out) {
  validate(deltas, weights, out.size());
  double total = 0;
  for (const double w : weights) total += w;
  if (!(total > 0) || !std::isfinite(total))
    throw make_error(ErrorKind::Data, "weighted mean: weights sum to ", total,
                     " (need a finite, positive sum)");

  // Normalising the weights first keeps every partial sum within the deltas' range, so huge
  // weights cannot overflow the accumulator.
  std::vector<double> share(weights.size());
  for (std::size_t i = 0; i < weights.size(); ++i) share[i] = weights[i] / total;

  // Delta-major over a block of elements: the deltas are read sequentially, while each element
  // still sums over the deltas in the listed order, so the result does not depend on the block.
  constexpr std::size_t kBlock = 1024;
  std::array<double, kBlock> acc;
  for (std::size_t begin = 0; begin < out.size(); begin += kBlock) {
    const std::size_t count = std::min(kBlock, out.size() - begin);
    std::fill_n(acc.begin(), count, 0.0);
    for (std::size_t i = 0; i < deltas.size(); ++i) {
      const float* d = deltas[i].data() + begin;
      const double s = share[i];
      for (std::size_t j = 0; j < count; ++j) acc[j] += s * d[j];
    }
    for (std::size_t j = 0; j < count; ++j) out[begin + j] = static_cast<float>(acc[j]);
  }
}

double staleness_weight(std::int64_t tokens, std::int64_t staleness, const StalenessOptions& options) {
  if (tokens < 0 || staleness < 0)
    throw make_error(ErrorKind::Data, "staleness weight: tokens ", tokens, " and staleness ", staleness,
                     " must be >= 0");
  if (staleness > options.max_staleness) return 0.0;
  const double t = static_cast<double>(tokens);
  return options.decay == StalenessDecay::Constant ? t : t / (1.0 + static_cast<double>(staleness));
}

void eager_estimate(std::span<const float> fresh, double share, std::span<float> out) {
  MERIDIAN_CHECK(out.size() == fresh.size(), "fresh=", fresh.size(), " out=", out.size());
  MERIDIAN_CHECK(share > 0.0 && share <= 1.0, "share=", share);
  for (std::size_t j = 0; j < out.size(); ++j) out[j] = static_cast<float>(share * static_cast<double>(fresh[j]));
}

}  // namespace meridian
