#pragma once
// What the CUDA parity tests share: the skip-without-a-device check, random inputs, and the error
// measure every tolerance is stated in (worst |gpu - cpu| over max |cpu|).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/device/cuda_probe.hpp"
#include "core/util/rng.hpp"

namespace meridian::testing {

// Call first in every GPU test case: `if (!have_gpu()) return;`
inline bool have_gpu() {
  if (cuda_device_count() > 0) return true;
  MESSAGE("skipped: no CUDA device");
  return false;
}

inline std::vector<float> normal_floats(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.normal()) * scale;
  return v;
}

inline std::vector<std::uint16_t> random_tokens(std::size_t n, int vocab, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::uint16_t> t(n);
  for (auto& x : t) x = static_cast<std::uint16_t>(rng.next_u64() % vocab);
  return t;
}

// NaN anywhere makes it infinite.
template <class A, class B>
double rel_err(const A& got, const B& want) {
  REQUIRE(got.size() == want.size());
  double scale = 1e-30, worst = 0;
  for (auto w : want) scale = std::max(scale, std::abs(static_cast<double>(w)));
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double d = std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i]));
    worst = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(worst, d);
  }
  return worst / scale;
}

}  // namespace meridian::testing

#define CHECK_CLOSE(got, want, tolerance)                                                \
  do {                                                                                   \
    const double err_ = ::meridian::testing::rel_err(got, want);                         \
    CHECK_MESSAGE(err_ <= (tolerance), #got " vs the CPU: relative error ", err_);       \
  } while (0)
