#pragma once
// What the CUDA parity tests share: the skip-without-a-device check, random inputs, and the error
// measure every tolerance is stated in (worst |gpu - cpu| over max |cpu|).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
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

inline std::vector<std::int32_t> random_tokens(std::size_t n, int vocab, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> t(n);
  for (auto& x : t) x = static_cast<std::int32_t>(rng.next_u64() % vocab);
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

inline const char* file_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

}  // namespace meridian::testing

// Every comparison also prints its error (`parity FILE:LINE EXPR err E tol T`, only where a GPU
// ran the case): scripts/gpu-check.sh gathers them into the parity table of docs/gpu.md.
#define CHECK_CLOSE(got, want, tolerance)                                                       \
  do {                                                                                          \
    const double err_ = ::meridian::testing::rel_err(got, want);                                \
    std::printf("parity %s:%d %s err %.3e tol %.1e\n", ::meridian::testing::file_name(__FILE__), \
                __LINE__, #got, err_, static_cast<double>(tolerance));                          \
    CHECK_MESSAGE(err_ <= (tolerance), #got " vs the CPU: relative error ", err_);              \
  } while (0)
