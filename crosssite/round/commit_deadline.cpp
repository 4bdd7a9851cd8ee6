#include "crosssite/round/commit_deadline.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/util/error.hpp"

namespace meridian {

namespace {

// The median of a non-empty list; an even count takes the mean of the middle two.
double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace

void validate(const DeadlineOptions& o) {
  if (!std::isfinite(o.k) || !(o.k > 0)) throw make_error(ErrorKind::Config, "commit deadline: k ", o.k, " must be finite and > 0");
  if (!std::isfinite(o.floor_s) || !(o.floor_s >= 0))
    throw make_error(ErrorKind::Config, "commit deadline: floor_s ", o.floor_s, " must be finite and >= 0");
  if (!std::isfinite(o.ceiling_s) || !(o.ceiling_s >= o.floor_s))
    throw make_error(ErrorKind::Config, "commit deadline: ceiling_s ", o.ceiling_s, " must be finite and >= floor_s = ",
                     o.floor_s);
  if (!std::isfinite(o.fixed_s) || !(o.fixed_s >= 0))
    throw make_error(ErrorKind::Config, "commit deadline: fixed_s ", o.fixed_s, " must be finite and >= 0");
  if (o.window < 1) throw make_error(ErrorKind::Config, "commit deadline: window ", o.window, " must be >= 1");
  if (o.min_samples < 1 || o.min_samples > o.window)
    throw make_error(ErrorKind::Config, "commit deadline: min_samples ", o.min_samples, " must be in [1, window = ",
                     o.window, "]");
}

ArrivalHistory::ArrivalHistory(std::size_t capacity) : capacity_(capacity) {
  MERIDIAN_CHECK(capacity >= 1, "capacity=", capacity);
}

void ArrivalHistory::record(double lag_s) {
  MERIDIAN_CHECK(std::isfinite(lag_s) && lag_s >= 0, "lag_s=", lag_s);
  lags_.push_back(lag_s);
  while (lags_.size() > capacity_) lags_.pop_front();
}

std::optional<double> ArrivalHistory::deadline_s(const DeadlineOptions& options) const {
  validate(options);
  if (options.fixed_s > 0) return options.fixed_s;
  if (lags_.size() < static_cast<std::size_t>(options.min_samples)) return std::nullopt;
  const std::size_t n = std::min(lags_.size(), static_cast<std::size_t>(options.window));
  const std::vector<double> recent(lags_.end() - static_cast<std::ptrdiff_t>(n), lags_.end());
  const double median = median_of(recent);
  std::vector<double> deviations(recent.size());
  for (std::size_t i = 0; i < recent.size(); ++i) deviations[i] = std::abs(recent[i] - median);
  const double mad = median_of(std::move(deviations));
  return std::clamp(median + options.k * mad, options.floor_s, options.ceiling_s);
}

bool deadline_passed(double now, double first_arrival, const ArrivalHistory& history, const DeadlineOptions& options) {
  const auto deadline = history.deadline_s(options);
  return deadline && now - first_arrival >= *deadline;
}

}  // namespace meridian
