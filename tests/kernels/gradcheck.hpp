#pragma once
// Central finite differences in double precision, the reference every backward kernel is checked against.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "core/util/rng.hpp"

namespace meridian::testing {

inline std::vector<double> random_vector(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  std::vector<double> v(n);
  for (auto& x : v) x = rng.normal() * scale;
  return v;
}

// Compares analytic d(loss)/dx with (loss(x+h) - loss(x-h)) / 2h for every element of x (or every
// `stride`-th one). Returns the worst error relative to the gradient's overall magnitude.
inline double gradcheck(std::vector<double>& x, const std::vector<double>& analytic,
                        const std::function<double()>& loss, std::size_t stride = 1, double h = 1e-5) {
  REQUIRE(x.size() == analytic.size());
  double scale = 1e-12, worst = 0;
  for (double g : analytic) scale = std::max(scale, std::abs(g));
  for (std::size_t i = 0; i < x.size(); i += stride) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = loss();
    x[i] = saved - h;
    const double down = loss();
    x[i] = saved;
    const double numeric = (up - down) / (2 * h);
    worst = std::max(worst, std::abs(numeric - analytic[i]) / scale);
  }
  return worst;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

inline std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

// Worst |a - b| relative to max |b|: the float kernel against the double reference.
template <class A>
double rel_diff(const A& a, const std::vector<double>& b) {
  double scale = 1e-12, worst = 0;
  for (double x : b) scale = std::max(scale, std::abs(x));
  for (std::size_t i = 0; i < b.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  return worst / scale;
}

}  // namespace meridian::testing
