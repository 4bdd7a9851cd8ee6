#include "core/optim/grad_clip.hpp"

#include <cmath>

#include "kernels/cpu/elementwise.hpp"

namespace meridian {

double clip_grad_norm(std::span<float> grads, double max_norm) {
  const double norm = std::sqrt(kernels::sum_squares(grads.data(), grads.size()));
  if (max_norm > 0 && std::isfinite(norm) && norm > max_norm)
    kernels::scale(grads.data(), grads.size(), static_cast<float>(max_norm / (norm + 1e-6)));
  return norm;
}

}  // namespace meridian
