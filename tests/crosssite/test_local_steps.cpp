// crosssite/round/local_steps: dynamic local updates, H_site = max(1, floor(speed_site / speed_ref * H)).
#include <doctest/doctest.h>

#include <limits>
#include <string>

#include "core/util/error.hpp"
#include "crosssite/round/local_steps.hpp"

using namespace meridian;

namespace {

std::string config_error(double site, double ref, int H) {
  try {
    local_steps(site, ref, H);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Config);
    return e.what();
  }
  FAIL("no Error thrown");
  return {};
}

}  // namespace

TEST_CASE("a site as fast as the reference runs H, a slower one proportionally fewer") {
  CHECK(local_steps(1.0, 1.0, 50) == 50);
  CHECK(local_steps(0.5, 1.0, 50) == 25);
  CHECK(local_steps(0.5, 1.0, 51) == 25);  // 25.5 floors
  CHECK(local_steps(2.0, 4.0, 100) == 50);
  CHECK(local_steps(1.0, 3.0, 10) == 3);   // 3.33 floors
}

TEST_CASE("never fewer than one step") {
  CHECK(local_steps(0.001, 1.0, 50) == 1);
  CHECK(local_steps(1e-300, 1.0, 1) == 1);
}

TEST_CASE("a faster site than the reference runs more than H") {
  CHECK(local_steps(2.0, 1.0, 50) == 100);
}

TEST_CASE("decimal speeds whose binary quotient falls just short of an integer are not floored away") {
  // 0.3 / 0.1 is 2.9999999999999996 in binary; the user means 3.
  CHECK(local_steps(0.3, 0.1, 10) == 30);
  CHECK(local_steps(0.7, 0.1, 1) == 7);
  CHECK(local_steps(0.29, 0.1, 10) == 29);
  // A genuine fraction still floors.
  CHECK(local_steps(0.295, 0.1, 10) == 29);
}

TEST_CASE("non-positive or non-finite speeds and H below 1 are config errors") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(config_error(0, 1, 10).find("site speed 0") != std::string::npos);
  CHECK(config_error(-1, 1, 10).find("site speed -1") != std::string::npos);
  CHECK(config_error(nan, 1, 10).find("site speed") != std::string::npos);
  CHECK(config_error(inf, 1, 10).find("site speed") != std::string::npos);
  CHECK(config_error(1, 0, 10).find("reference speed 0") != std::string::npos);
  CHECK(config_error(1, nan, 10).find("reference speed") != std::string::npos);
  CHECK(config_error(1, -inf, 10).find("reference speed") != std::string::npos);
  CHECK(config_error(1, 1, 0).find("inner_steps 0") != std::string::npos);
  CHECK(config_error(1e300, 1e-300, 10).find("more than an int holds") != std::string::npos);
}
