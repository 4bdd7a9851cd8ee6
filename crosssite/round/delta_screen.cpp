#include "crosssite/round/delta_screen.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/util/error.hpp"

namespace meridian {

namespace {

// Shortest round-trip text of a double: the reason strings must be the same on every site.
std::string number(double v) {
  std::ostringstream out;
  out.precision(17);
  out << v;
  return out.str();
}

}  // namespace

DeltaScreen::DeltaScreen(DeltaScreenOptions options) : options_(options) {
  if (!std::isfinite(options.max_norm_ratio) || !(options.max_norm_ratio > 1))
    throw make_error(ErrorKind::Config, "delta screen: max_norm_ratio ", options.max_norm_ratio,
                     " must be finite and > 1");
  if (options.window < 1) throw make_error(ErrorKind::Config, "delta screen: window ", options.window, " must be >= 1");
  if (options.min_history < 1 || options.min_history > options.window)
    throw make_error(ErrorKind::Config, "delta screen: min_history ", options.min_history, " must be in [1, window = ",
                     options.window, "]");
  if (options.max_spanned_rounds < 1)
    throw make_error(ErrorKind::Config, "delta screen: max_spanned_rounds ", options.max_spanned_rounds,
                     " must be >= 1");
}

DeltaScreen::Verdict DeltaScreen::check(std::span<const float> decoded, std::size_t expected_size, int rounds) const {
  Tally tally;
  tally.add(decoded);
  return judge(tally, expected_size, rounds);
}

void DeltaScreen::Tally::add(std::span<const float> piece) {
  const std::size_t at = values_;
  values_ += piece.size();
  if (!bad_.empty()) return;
  for (std::size_t j = 0; j < piece.size(); ++j) {
    const float x = piece[j];
    if (!std::isfinite(x)) {
      std::ostringstream reason;
      reason << "non-finite value " << x << " at index " << at + j;
      bad_ = reason.str();
      return;
    }
    sum_ += static_cast<double>(x) * static_cast<double>(x);
  }
}

DeltaScreen::Verdict DeltaScreen::judge(const Tally& tally, std::size_t expected_size, int rounds) const {
  MERIDIAN_CHECK(rounds >= 1, "rounds=", rounds);
  // The size first: a wrong one says so, not where its values went wrong.
  if (tally.values_ != expected_size)
    return {false,
            "wrong size: " + std::to_string(tally.values_) + " values, expected " + std::to_string(expected_size), 0};
  if (!tally.bad_.empty()) return {false, tally.bad_, 0};
  const double norm = std::sqrt(tally.sum_);
  if (norms_.size() >= static_cast<std::size_t>(options_.min_history)) {
    const double median = median_norm();
    const int spanned = std::min(rounds, options_.max_spanned_rounds);
    if (median > 0 && norm > options_.max_norm_ratio * median * spanned)
      return {false,
              "norm " + number(norm) + " exceeds " + number(options_.max_norm_ratio) + " x the median " + number(median) +
                  " of the last " + std::to_string(norms_.size()) + " accepted deltas" +
                  (spanned > 1 ? " x " + std::to_string(spanned) + " rounds spanned" : ""),
              norm};
  }
  return {true, "", norm};
}

void DeltaScreen::accept(double norm) {
  MERIDIAN_CHECK(std::isfinite(norm) && norm >= 0, "norm=", norm);
  norms_.push_back(norm);
  while (norms_.size() > static_cast<std::size_t>(options_.window)) norms_.pop_front();
}

double DeltaScreen::median_norm() const {
  if (norms_.empty()) return 0;
  std::vector<double> sorted(norms_.begin(), norms_.end());
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

void DeltaScreen::follow(std::span<const double> norms) {
  norms_.clear();
  const std::size_t keep = std::min(norms.size(), static_cast<std::size_t>(options_.window));
  for (const double n : norms.last(keep)) accept(n);
}

}  // namespace meridian
