// The replica's account of its wall time: parts, start-up, the rest, and both utilizations.
#include <doctest/doctest.h>

#include "sites/replica/time_breakdown.hpp"

using namespace meridian;
using Part = TimeBreakdown::Part;

TEST_CASE("every second of the wall time falls in one part, the untimed ones in other") {
  TimeBreakdown t(100.0);
  t.training_begins(104.0);  // 4 s of start-up
  t.training_begins(110.0);  // only the first step starts training
  t.add(Part::Steps, 80.0);
  t.add(Part::Steps, 6.0);
  t.add(Part::Eval, 3.0);
  t.add(Part::CrossSiteWait, 1.5);
  t.add(Part::Poll, 0.5);
  t.add(Part::Finish, 1.0);
  const auto s = t.summary(200.0);
  CHECK(s["wall_s"].get<double>() == doctest::Approx(100.0));
  const auto& parts = s["time_s"];
  CHECK(parts["startup"].get<double>() == doctest::Approx(4.0));
  CHECK(parts["steps"].get<double>() == doctest::Approx(86.0));
  CHECK(parts["apply"].get<double>() == 0.0);
  CHECK(parts["other"].get<double>() == doctest::Approx(100.0 - 4 - 86 - 3 - 1.5 - 0.5 - 1));
  double sum = 0;
  for (const auto& [name, seconds] : parts.items()) sum += seconds.get<double>();
  CHECK(sum == doctest::Approx(100.0));
  CHECK(parts.size() == static_cast<std::size_t>(Part::kCount) + 2);
  // Whole process: 86 of 100 s; training phase: without start-up, evaluations and finishing.
  CHECK(s["compute_utilization"].get<double>() == doctest::Approx(0.86));
  CHECK(s["training_utilization"].get<double>() == doctest::Approx(86.0 / (100.0 - 4 - 3 - 1)));
}

TEST_CASE("a replica that never stepped spent its whole time starting") {
  TimeBreakdown t(10.0);
  CHECK_FALSE(t.training_began());
  const auto s = t.summary(12.5);
  CHECK(s["time_s"]["startup"].get<double>() == doctest::Approx(2.5));
  CHECK(s["time_s"]["other"].get<double>() == 0.0);
  CHECK(s["compute_utilization"].get<double>() == 0.0);
  CHECK(s["training_utilization"].get<double>() == 0.0);
}

TEST_CASE("clock reads a hair apart never make other negative") {
  TimeBreakdown t(0.0);
  t.training_begins(0.0);
  t.add(Part::Steps, 1.0 + 1e-12);
  CHECK(t.summary(1.0)["time_s"]["other"].get<double>() == 0.0);
}
