#pragma once
// When a version stops waiting for its quorum (the issue's commit rule: "a quorum of deltas has
// been announced or an adaptive deadline passes"). The deadline adapts to how late the later
// deltas of recent versions arrived after the first one: median + k * MAD of those lags, clamped,
// so a slow-but-steady site is waited for while a site that stopped sending is not. Pure
// functions of (now, state, options); the caller reads the clock and records the lags.
#include <cstddef>
#include <deque>
#include <optional>

namespace meridian {

struct DeadlineOptions {
  double k = 3;            // MADs above the median lag; raw MAD (not scaled to a sigma): 3 MAD ~ 2 sigma
  double floor_s = 0.5;    // never cut a version shorter than this
  double ceiling_s = 60;   // never wait longer than this for a quorum that does not come
  double fixed_s = 0;      // > 0: always this deadline, whatever the history ([outer] deadline_ms)
  int window = 16;         // the latest lags the median and MAD are taken over
  int min_samples = 3;     // no adaptive deadline (wait for the quorum only) before this many lags
};

// Error(Config) naming the field when: k is not finite and > 0, floor_s is not finite and >= 0,
// ceiling_s is not finite and >= floor_s, fixed_s is not finite and >= 0, window < 1, or
// min_samples is not in [1, window].
void validate(const DeadlineOptions& options);

class ArrivalHistory {
 public:
  // Keeps the latest `capacity` lags (>= 1), enough for any window a job is likely to choose.
  explicit ArrivalHistory(std::size_t capacity = 256);

  // One delta arrived lag_s seconds after the first delta of its version did. InvariantError
  // when lag_s is negative or not finite (the caller measures it on a monotonic clock).
  void record(double lag_s);

  // The deadline in seconds after a version's first delta: fixed_s when > 0; otherwise nullopt
  // (wait for the quorum only) while fewer than min_samples lags are known, else
  // clamp(median + k * MAD, floor_s, ceiling_s) over the latest `window` lags, where MAD is the
  // median of |lag - median| and a median of an even count is the mean of the middle two.
  // Error(Config) when the options are invalid (see validate).
  std::optional<double> deadline_s(const DeadlineOptions& options) const;

  std::size_t size() const { return lags_.size(); }

 private:
  std::size_t capacity_;
  std::deque<double> lags_;
};

// Whether a version whose first delta arrived at `first_arrival` (seconds on the caller's
// monotonic clock) has waited past its deadline at `now`: now - first_arrival >= deadline. False
// while there is no deadline (nullopt above).
bool deadline_passed(double now, double first_arrival, const ArrivalHistory& history, const DeadlineOptions& options);

}  // namespace meridian
