#pragma once
// What every benchmark reports: medians of repeated timings on a steady clock.
#include <algorithm>
#include <chrono>
#include <vector>

namespace meridian::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The upper median for an even count: benchmarks run odd counts.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace meridian::bench
