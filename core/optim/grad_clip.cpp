#include "core/optim/grad_clip.hpp"

#include <cmath>
#include <vector>

#include "core/util/error.hpp"
#include "kernels/cpu/elementwise.hpp"

namespace meridian {
namespace {

std::size_t units_of(std::size_t n) { return (n + kShardUnit - 1) / kShardUnit; }

double clip_by_units(std::span<float> part, const std::vector<double>& unit_sums, double max_norm) {
  double squares = 0;
  for (double s : unit_sums) squares += s;
  const double norm = std::sqrt(squares);
  if (max_norm > 0 && std::isfinite(norm) && norm > max_norm)
    kernels::scale(part.data(), part.size(), static_cast<float>(max_norm / (norm + 1e-6)));
  return norm;
}

}  // namespace

double clip_grad_norm(std::span<float> grads, double max_norm) {
  std::vector<double> sums(units_of(grads.size()));
  kernels::sum_squares_by_unit(grads.data(), grads.size(), kShardUnit, sums.data());
  return clip_by_units(grads, sums, max_norm);
}

double clip_grad_norm(std::span<float> grads, ShardRange part, double max_norm, const UnitSumsGather& gather_units) {
  MERIDIAN_CHECK(part.end() <= grads.size() && part.offset % kShardUnit == 0 &&
                     (part.end() % kShardUnit == 0 || part.end() == grads.size()),
                 "part ", part.offset, "+", part.count, " of ", grads.size(), " is not cut on units of ", kShardUnit);
  std::vector<double> sums(units_of(grads.size()), 0.0);
  kernels::sum_squares_by_unit(grads.data() + part.offset, part.count, kShardUnit, sums.data() + part.offset / kShardUnit);
  gather_units(sums);
  return clip_by_units(grads.subspan(part.offset, part.count), sums, max_norm);
}

}  // namespace meridian
