#include "crosssite/round/local_steps.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/util/error.hpp"

namespace meridian {

int local_steps(double speed_site, double speed_ref, int H) {
  if (!std::isfinite(speed_site) || !(speed_site > 0))
    throw make_error(ErrorKind::Config, "dynamic inner steps: site speed ", speed_site, " must be finite and > 0");
  if (!std::isfinite(speed_ref) || !(speed_ref > 0))
    throw make_error(ErrorKind::Config, "dynamic inner steps: reference speed ", speed_ref,
                     " must be finite and > 0");
  if (H < 1) throw make_error(ErrorKind::Config, "dynamic inner steps: inner_steps ", H, " must be >= 1");
  const double exact = speed_site / speed_ref * H;
  // Speeds are decimal hints ("0.3"): their binary quotient can fall just below the integer the
  // user meant, and floor would then lose a whole step.
  const double nearest = std::round(exact);
  const double steps = std::abs(exact - nearest) <= 1e-9 * std::max(1.0, std::abs(exact)) ? nearest : std::floor(exact);
  if (!(steps <= static_cast<double>(std::numeric_limits<int>::max())))
    throw make_error(ErrorKind::Config, "dynamic inner steps: speed ", speed_site, " against reference ", speed_ref,
                     " gives ", exact, " inner steps for H = ", H, ", more than an int holds");
  return std::max(1, static_cast<int>(steps));
}

}  // namespace meridian
