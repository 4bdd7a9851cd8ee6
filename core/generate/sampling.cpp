#include "core/generate/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/util/error.hpp"

namespace meridian {

std::vector<std::string> validate_sampling(const SamplingOptions& o) {
  std::vector<std::string> problems;
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    problems.push_back("temperature must be a finite number of at least 0 (0: greedy), not " +
                       std::to_string(o.temperature));
  if (o.top_k < 0) problems.push_back("top_k must be at least 0 (0: no cut), not " + std::to_string(o.top_k));
  if (!(o.top_p > 0 && o.top_p <= 1))
    problems.push_back("top_p must be in (0, 1] (1: no cut), not " + std::to_string(o.top_p));
  return problems;
}

namespace {

void require_finite(std::span<const float> logits) {
  for (std::size_t i = 0; i < logits.size(); ++i)
    if (!std::isfinite(logits[i]))
      throw make_error(ErrorKind::Data, "the model's logit for token ", i, " is ", logits[i],
                       ": its weights are not finite (a diverged or damaged checkpoint)");
}

std::int32_t argmax(std::span<const float> logits) {
  return static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// The candidates, most likely first (equals by id): the top_k, or all when no cut needs an order.
std::vector<std::int32_t> candidates(std::span<const float> logits, const SamplingOptions& o) {
  std::vector<std::int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  const auto more_likely = [&](std::int32_t a, std::int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  const std::size_t k = o.top_k > 0 ? std::min<std::size_t>(o.top_k, ids.size()) : ids.size();
  if (o.top_p < 1) {
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), more_likely);
  } else if (k < ids.size()) {
    std::nth_element(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), more_likely);
    std::sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), more_likely);
  }
  ids.resize(k);
  return ids;
}

}  // namespace

std::int32_t sample_token(std::span<const float> logits, const SamplingOptions& o, Rng& rng) {
  MERIDIAN_CHECK(!logits.empty() && validate_sampling(o).empty(), "sampling ", logits.size(), " logits at temperature ",
                 o.temperature, ", top_k ", o.top_k, ", top_p ", o.top_p);
  require_finite(logits);
  if (o.temperature == 0) return argmax(logits);
  const std::vector<std::int32_t> ids = candidates(logits, o);
  const float top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> weight(ids.size());
  double total = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) total += weight[i] = std::exp((logits[ids[i]] - top) / o.temperature);
  std::size_t kept = ids.size();
  if (o.top_p < 1) {  // the fewest candidates, in order, whose probability reaches top_p
    double mass = 0;
    for (kept = 0; kept < ids.size();) {
      mass += weight[kept++];
      if (mass >= o.top_p * total) break;
    }
    total = mass;
  }
  const double u = rng.uniform() * total;
  double below = 0;
  for (std::size_t i = 0; i + 1 < kept; ++i) {
    below += weight[i];
    if (u < below) return ids[i];
  }
  return ids[kept - 1];
}

}  // namespace meridian
