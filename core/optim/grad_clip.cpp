#include "core/optim/grad_clip.hpp"

#include <cmath>

#include "kernels/cpu/elementwise.hpp"

namespace meridian {

double clip_grad_norm(std::span<float> grads, double max_norm) {
  return clip_grad_norm(grads, max_norm, [](double squares) { return squares; });
}

double clip_grad_norm(std::span<float> part, double max_norm, const std::function<double(double)>& sum_over_group) {
  const double norm = std::sqrt(sum_over_group(kernels::sum_squares(part.data(), part.size())));
  if (max_norm > 0 && std::isfinite(norm) && norm > max_norm)
    kernels::scale(part.data(), part.size(), static_cast<float>(max_norm / (norm + 1e-6)));
  return norm;
}

}  // namespace meridian
