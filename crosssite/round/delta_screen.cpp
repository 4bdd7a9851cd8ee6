#include "crosssite/round/delta_screen.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/model/shard_map.hpp"
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

DeltaScreen::Tally::Tally(std::size_t first) : first_(first) {
  MERIDIAN_CHECK(first % kShardUnit == 0, "a tally starts on a unit: first=", first, " unit=", kShardUnit);
}

DeltaScreen::Tally::Tally(std::size_t first, std::size_t values, std::vector<double> units, std::string bad)
    : Tally(first) {
  MERIDIAN_CHECK(units.size() <= values / kShardUnit + 1, units.size(), " units' sums for ", values, " values");
  values_ = values;
  units_ = std::move(units);
  bad_ = std::move(bad);
}

void DeltaScreen::Tally::add(std::span<const float> piece) {
  std::size_t j = 0;
  while (j < piece.size() && bad_.empty()) {
    const std::size_t at = first_ + values_ + j;
    if (at % kShardUnit == 0) units_.push_back(0);
    const std::size_t end = std::min(piece.size(), j + (kShardUnit - at % kShardUnit));
    double& sum = units_.back();
    for (; j < end; ++j) {
      const float x = piece[j];
      if (!std::isfinite(x)) {
        std::ostringstream reason;
        reason << "non-finite value " << x << " at index " << first_ + values_ + j;
        bad_ = reason.str();
        break;
      }
      sum += static_cast<double>(x) * static_cast<double>(x);
    }
  }
  values_ += piece.size();
}

void DeltaScreen::Tally::join(const Tally& next) {
  MERIDIAN_CHECK(next.first_ == first_ + values_ && (next.values_ == 0 || next.first_ % kShardUnit == 0),
                 "tallies joined out of order: this one holds [", first_, ", ", first_ + values_,
                 "), the next starts at ", next.first_);
  values_ += next.values_;
  if (!bad_.empty()) return;
  bad_ = next.bad_;
  units_.insert(units_.end(), next.units_.begin(), next.units_.end());
}

DeltaScreen::Verdict DeltaScreen::judge(const Tally& tally, std::size_t expected_size, int rounds) const {
  MERIDIAN_CHECK(rounds >= 1, "rounds=", rounds);
  // The size first: a wrong one says so, not where its values went wrong.
  if (tally.values_ != expected_size)
    return {false,
            "wrong size: " + std::to_string(tally.values_) + " values, expected " + std::to_string(expected_size), 0};
  if (!tally.bad_.empty()) return {false, tally.bad_, 0};
  double squares = 0;
  for (const double unit : tally.units_) squares += unit;
  const double norm = std::sqrt(squares);
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
