// crosssite/round/commit_deadline: the adaptive deadline (median + k * MAD of recent arrival lags,
// clamped), the fixed one, and when no deadline exists yet.
#include <doctest/doctest.h>

#include <limits>
#include <string>

#include "core/util/error.hpp"
#include "crosssite/round/commit_deadline.hpp"

using namespace meridian;

namespace {

template <class F>
std::string config_error(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Config);
    return e.what();
  }
  FAIL("no Error thrown");
  return {};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("no deadline until min_samples lags are known: wait for the quorum only") {
  ArrivalHistory h;
  const DeadlineOptions o;
  CHECK_FALSE(h.deadline_s(o).has_value());
  h.record(1);
  h.record(2);
  CHECK_FALSE(h.deadline_s(o).has_value());
  CHECK_FALSE(deadline_passed(1e9, 0, h, o));  // never passes without a deadline
  h.record(3);
  CHECK(h.deadline_s(o).has_value());
}

TEST_CASE("median + k * MAD, by hand") {
  // Lags 1, 2, 3, 4, 10: median 3; deviations 2, 1, 0, 1, 7 -> MAD 1; 3 + 3 * 1 = 6.
  ArrivalHistory h;
  for (double lag : {4.0, 1.0, 10.0, 3.0, 2.0}) h.record(lag);
  CHECK(*h.deadline_s({}) == 6.0);
  CHECK(*h.deadline_s({.k = 1}) == 4.0);
  // Even count: lags 1, 2, 3, 4 -> median 2.5; deviations 1.5, 0.5, 0.5, 1.5 -> MAD 1; 2.5 + 3 = 5.5.
  ArrivalHistory even;
  for (double lag : {1.0, 2.0, 3.0, 4.0}) even.record(lag);
  CHECK(*even.deadline_s({}) == 5.5);
}

TEST_CASE("clamped to floor and ceiling") {
  ArrivalHistory steady;
  for (int i = 0; i < 5; ++i) steady.record(0.1);  // MAD 0: median 0.1 is below the floor
  CHECK(*steady.deadline_s({}) == 0.5);
  CHECK(*steady.deadline_s({.floor_s = 0}) == doctest::Approx(0.1));
  ArrivalHistory slow;
  for (double lag : {50.0, 100.0, 200.0}) slow.record(lag);
  CHECK(*slow.deadline_s({}) == 60.0);
  CHECK(*slow.deadline_s({.ceiling_s = 1000}) == 100.0 + 3 * 50.0);
}

TEST_CASE("only the latest window lags count") {
  ArrivalHistory h;
  for (int i = 0; i < 10; ++i) h.record(30);
  for (int i = 0; i < 4; ++i) h.record(2);
  CHECK(*h.deadline_s({.window = 4}) == 2.0);
  CHECK(*h.deadline_s({.window = 16}) == 30.0);  // 10 of 14 are 30: median 30, MAD 0
  // The history itself keeps at most its capacity.
  ArrivalHistory small(3);
  for (double lag : {100.0, 1.0, 1.0, 1.0}) small.record(lag);
  CHECK(small.size() == 3);
  CHECK(*small.deadline_s({}) == 1.0);  // the 100 s lag is gone
}

TEST_CASE("fixed_s overrides everything, even with no history") {
  ArrivalHistory h;
  CHECK(*h.deadline_s({.fixed_s = 2.5}) == 2.5);
  for (double lag : {50.0, 100.0, 200.0}) h.record(lag);
  CHECK(*h.deadline_s({.fixed_s = 2.5}) == 2.5);
  CHECK(*h.deadline_s({.ceiling_s = 1, .fixed_s = 2.5}) == 2.5);  // not clamped: the user asked for it
}

TEST_CASE("deadline_passed compares the wait since the first delta with the deadline") {
  ArrivalHistory h;
  for (double lag : {4.0, 1.0, 10.0, 3.0, 2.0}) h.record(lag);  // deadline 6 s
  const DeadlineOptions o;
  CHECK_FALSE(deadline_passed(105.9, 100, h, o));
  CHECK(deadline_passed(106, 100, h, o));
  CHECK(deadline_passed(200, 100, h, o));
  CHECK(deadline_passed(0.5, 0, ArrivalHistory{}, {.fixed_s = 0.5}));
  CHECK_FALSE(deadline_passed(0.4, 0, ArrivalHistory{}, {.fixed_s = 0.5}));
}

TEST_CASE("options are validated, naming the field") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const ArrivalHistory h;
  CHECK(contains(config_error([&] { h.deadline_s({.k = 0}); }), "k 0"));
  CHECK(contains(config_error([&] { h.deadline_s({.k = nan}); }), "k "));
  CHECK(contains(config_error([&] { h.deadline_s({.floor_s = -1}); }), "floor_s -1"));
  CHECK(contains(config_error([&] { h.deadline_s({.floor_s = 5, .ceiling_s = 4}); }), "ceiling_s 4"));
  CHECK(contains(config_error([&] { h.deadline_s({.ceiling_s = inf}); }), "ceiling_s inf"));
  CHECK(contains(config_error([&] { h.deadline_s({.fixed_s = -0.5}); }), "fixed_s -0.5"));
  CHECK(contains(config_error([&] { h.deadline_s({.window = 0}); }), "window 0"));
  CHECK(contains(config_error([&] { h.deadline_s({.window = 2, .min_samples = 3}); }), "min_samples 3"));
  CHECK(contains(config_error([&] { validate({.min_samples = 0}); }), "min_samples 0"));
  ArrivalHistory r;
  CHECK_THROWS_AS(r.record(-0.1), InvariantError);
  CHECK_THROWS_AS(r.record(nan), InvariantError);
}
