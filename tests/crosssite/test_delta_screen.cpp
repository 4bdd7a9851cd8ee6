// crosssite/round/delta_screen: which decoded deltas are refused (wrong size, non-finite, a norm far
// beyond the recent ones), that the verdict depends only on the shared history, and a history taken from a commit record.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/model/shard_map.hpp"
#include "core/util/error.hpp"
#include "crosssite/round/delta_screen.hpp"
#include "tests/support/error_of.hpp"

using namespace meridian;

namespace {

using Vec = std::vector<float>;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A delta of n values whose L2 norm is exactly `norm`: (norm, 0, 0, ...).
Vec with_norm(float norm, std::size_t n = 4) {
  Vec v(n, 0.0f);
  v[0] = norm;
  return v;
}

using meridian::testing::error_of;

}  // namespace

TEST_CASE("a sound delta passes with its L2 norm") {
  const DeltaScreen screen;
  const auto v = screen.check(Vec{3, 4}, 2);
  CHECK(v.ok);
  CHECK(v.reason.empty());
  CHECK(v.norm == 5.0);
  // The norm is summed in double: float squares of 1e20 would overflow.
  const auto big = screen.check(Vec{1e20f, 1e20f}, 2);
  CHECK(big.ok);
  CHECK(big.norm == doctest::Approx(std::sqrt(2.0) * 1e20));
}

TEST_CASE("the wrong number of values is refused") {
  const DeltaScreen screen;
  const auto v = screen.check(Vec{1, 2, 3}, 4);
  CHECK_FALSE(v.ok);
  CHECK(v.reason == "wrong size: 3 values, expected 4");
  CHECK_FALSE(screen.check(Vec{}, 1).ok);
  CHECK(screen.check(Vec{}, 0).ok);
}

TEST_CASE("the first non-finite value is named with its index") {
  const DeltaScreen screen;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  auto v = screen.check(Vec{1, 2, nan, inf}, 4);
  CHECK_FALSE(v.ok);
  CHECK(v.reason == "non-finite value nan at index 2");
  v = screen.check(Vec{1, -inf, nan}, 3);
  CHECK_FALSE(v.ok);
  CHECK(v.reason == "non-finite value -inf at index 1");
  // The size is checked first.
  CHECK(contains(screen.check(Vec{nan}, 2).reason, "wrong size"));
}

TEST_CASE("no norm check until min_history norms are known, then ratio x median") {
  DeltaScreen screen({.max_norm_ratio = 10, .window = 16, .min_history = 3});
  // Anything finite passes while the history is short.
  screen.accept(1);
  screen.accept(2);
  CHECK(screen.check(with_norm(1e6f), 4).ok);
  screen.accept(3);  // median 2: the limit is 20
  CHECK(screen.median_norm() == 2.0);
  CHECK(screen.check(with_norm(20), 4).ok);  // at the limit: still accepted
  const auto refused = screen.check(with_norm(21), 4);
  CHECK_FALSE(refused.ok);
  CHECK(refused.norm == 21.0);
  CHECK(refused.reason == "norm 21 exceeds 10 x the median 2 of the last 3 accepted deltas");
  // An even count takes the mean of the middle two: 2, 3 -> 2.5, limit 25.
  screen.accept(100);
  CHECK(screen.median_norm() == 2.5);
  CHECK(screen.check(with_norm(25), 4).ok);
  CHECK_FALSE(screen.check(with_norm(25.5f), 4).ok);
}

TEST_CASE("a delta spanning k rounds may be k times as large, for k up to max_spanned_rounds") {
  DeltaScreen screen({.max_norm_ratio = 10, .window = 16, .min_history = 3, .max_spanned_rounds = 4});
  for (double n : {1.0, 2.0, 3.0}) screen.accept(n);  // median 2: a round's limit is 20
  CHECK_FALSE(screen.check(with_norm(60), 4).ok);
  CHECK(screen.check(with_norm(60), 4, 3).ok);
  const auto refused = screen.check(with_norm(61), 4, 3);
  CHECK_FALSE(refused.ok);
  CHECK(refused.reason == "norm 61 exceeds 10 x the median 2 of the last 3 accepted deltas x 3 rounds spanned");
  // A count past the cap buys no more than the cap: a claim of many rounds cannot switch the check off.
  CHECK(screen.check(with_norm(80), 4, 4).ok);
  CHECK_FALSE(screen.check(with_norm(81), 4, 1000).ok);
  CHECK_THROWS_AS(screen.check(with_norm(1), 4, 0), InvariantError);
}

TEST_CASE("the median is over the latest window norms only") {
  DeltaScreen screen({.max_norm_ratio = 2, .window = 3, .min_history = 1});
  for (double n : {1000.0, 1000.0, 1000.0}) screen.accept(n);
  CHECK(screen.check(with_norm(1500), 4).ok);
  for (double n : {1.0, 1.0, 1.0}) screen.accept(n);  // the large norms age out
  CHECK(screen.history() == std::vector<double>{1, 1, 1});
  CHECK_FALSE(screen.check(with_norm(1500), 4).ok);
  CHECK(screen.check(with_norm(2), 4).ok);
}

TEST_CASE("a zero median gives no scale and refuses nothing by norm") {
  DeltaScreen screen({.max_norm_ratio = 2, .window = 4, .min_history = 2});
  screen.accept(0);
  screen.accept(0);
  CHECK(screen.check(with_norm(5), 4).ok);
}

TEST_CASE("two screens with the same history reach the same verdicts") {
  DeltaScreen a, b;
  for (double n : {3.5, 1.25, 7.0, 2.0, 9.5}) {
    a.accept(n);
    b.accept(n);
  }
  for (float x : {1.0f, 300.0f, 350.0f, 400.0f, 1e9f}) {
    const auto va = a.check(with_norm(x), 4);
    const auto vb = b.check(with_norm(x), 4);
    CHECK(va.ok == vb.ok);
    CHECK(va.reason == vb.reason);
    CHECK(va.norm == vb.norm);
  }
}

TEST_CASE("options are validated") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(contains(error_of(ErrorKind::Config, [] { DeltaScreen({.max_norm_ratio = 1}); }), "max_norm_ratio 1"));
  error_of(ErrorKind::Config, [&] { DeltaScreen({.max_norm_ratio = nan}); });
  CHECK(contains(error_of(ErrorKind::Config, [] { DeltaScreen({.window = 0}); }), "window 0"));
  CHECK(contains(error_of(ErrorKind::Config, [] { DeltaScreen({.window = 4, .min_history = 5}); }), "min_history 5"));
  error_of(ErrorKind::Config, [] { DeltaScreen({.min_history = 0}); });
  CHECK(contains(error_of(ErrorKind::Config, [] { DeltaScreen({.max_spanned_rounds = 0}); }), "max_spanned_rounds 0"));
  DeltaScreen screen;
  CHECK_THROWS_AS(screen.accept(-1), InvariantError);
  CHECK_THROWS_AS(screen.accept(std::numeric_limits<double>::infinity()), InvariantError);
}

TEST_CASE("a screen that follows a record's history judges as the one that built it") {
  DeltaScreen screen({.max_norm_ratio = 100, .window = 4, .min_history = 3});
  for (double n : {1.0, 2.0, 3.0, 4.0, 5.0}) screen.accept(n);
  const std::vector<double> carried{1, 2, 3, 4, 5};  // a record may carry more than the window

  DeltaScreen follower({.max_norm_ratio = 100, .window = 4, .min_history = 3});
  follower.accept(1000);  // what it held before is replaced
  follower.follow(carried);
  CHECK(follower.history() == std::vector<double>{2, 3, 4, 5});
  CHECK(follower.check(with_norm(350), 4).ok == screen.check(with_norm(350), 4).ok);
  CHECK_FALSE(follower.check(with_norm(351), 4).ok);

  follower.follow({});  // version 0's: no history, no norm check yet
  CHECK(follower.history().empty());
  CHECK(follower.check(with_norm(1e6), 4).ok);
  const std::vector<double> impossible{1, -2};
  CHECK_THROWS_AS(follower.follow(impossible), InvariantError);
}

TEST_CASE("a delta tallied piece by piece gets check()'s verdict on the whole, norm bit for bit") {
  DeltaScreen screen;
  for (const double n : {1.0, 1.1, 0.9}) screen.accept(n);
  Vec whole(1000);
  for (std::size_t i = 0; i < whole.size(); ++i) whole[i] = 0.001f * static_cast<float>(i % 37) - 0.01f;
  const auto tallied = [&](const Vec& v, std::size_t expected) {
    DeltaScreen::Tally tally;
    for (std::size_t at = 0; at < v.size(); at += 300)
      tally.add(std::span<const float>(v).subspan(at, std::min<std::size_t>(300, v.size() - at)));
    return screen.judge(tally, expected);
  };
  auto a = screen.check(whole, 1000), b = tallied(whole, 1000);
  CHECK(a.ok == b.ok);
  CHECK(a.norm == b.norm);  // the same sum, in the same order
  whole[777] = std::numeric_limits<float>::infinity();
  a = screen.check(whole, 1000), b = tallied(whole, 1000);
  CHECK_FALSE(b.ok);
  CHECK(b.reason == a.reason);
  CHECK(b.reason.find("at index 777") != std::string::npos);
  CHECK(tallied(whole, 999).reason == "wrong size: 1000 values, expected 999");
  for (auto& x : whole) x = 100;
  a = screen.check(whole, 1000), b = tallied(whole, 1000);
  CHECK_FALSE(b.ok);
  CHECK(b.reason == a.reason);
}

TEST_CASE(
    "the tallies of a delta's parts, cut anywhere on units and joined in order, give the whole's verdict bit for bit") {
  DeltaScreen screen;
  for (const double n : {1.0, 1.1, 0.9}) screen.accept(n);
  const std::size_t n = 5 * kShardUnit + 777;  // the last unit is short
  Vec whole(n);
  for (std::size_t i = 0; i < n; ++i) whole[i] = 1e-3f * static_cast<float>((i * 7919) % 211) - 0.1f;
  const auto whole_verdict = screen.check(whole, n);
  const auto in_parts = [&](const std::vector<std::size_t>& cuts) {  // units where a new part starts
    std::vector<DeltaScreen::Tally> parts;
    std::size_t at = 0;
    for (std::size_t k = 0; k <= cuts.size(); ++k) {
      const std::size_t end = k < cuts.size() ? cuts[k] * kShardUnit : n;
      parts.emplace_back(at);
      for (std::size_t p = at; p < end; p += 1000)  // pieces across the units' bounds
        parts.back().add(std::span<const float>(whole).subspan(p, std::min<std::size_t>(1000, end - p)));
      at = end;
    }
    DeltaScreen::Tally joined = parts.front();
    for (std::size_t k = 1; k < parts.size(); ++k) joined.join(parts[k]);
    return screen.judge(joined, n);
  };
  for (const auto& cuts : std::vector<std::vector<std::size_t>>{{}, {1}, {2, 3}, {1, 2, 3, 4, 5}, {3, 3}}) {
    const auto v = in_parts(cuts);
    CHECK(v.ok == whole_verdict.ok);
    CHECK(v.norm == whole_verdict.norm);
  }
  // The sum is by units, not one running sum: the two differ in their last bits for most deltas,
  // and only the first is the same however the delta is cut.
  double running = 0;
  for (const float x : whole) running += static_cast<double>(x) * x;
  double by_units = 0;
  for (std::size_t u = 0; u < n; u += kShardUnit) {
    double s = 0;
    for (std::size_t i = u; i < std::min(n, u + kShardUnit); ++i) s += static_cast<double>(whole[i]) * whole[i];
    by_units += s;
  }
  CHECK(whole_verdict.norm == std::sqrt(by_units));
  CHECK(std::sqrt(running) == doctest::Approx(whole_verdict.norm).epsilon(1e-12));

  whole[3 * kShardUnit + 5] = std::numeric_limits<float>::quiet_NaN();  // the first bad value is named by its index
  CHECK(contains(in_parts({2, 4}).reason, "at index " + std::to_string(3 * kShardUnit + 5)));
  whole[kShardUnit + 1] = std::numeric_limits<float>::infinity();
  CHECK(contains(in_parts({2, 4}).reason, "at index " + std::to_string(kShardUnit + 1)));

  DeltaScreen::Tally first(0), late(2 * kShardUnit);
  first.add(std::span<const float>(whole).first(kShardUnit));
  CHECK_THROWS_AS(first.join(late), InvariantError);
  CHECK_THROWS_AS(DeltaScreen::Tally(100), InvariantError);
}
