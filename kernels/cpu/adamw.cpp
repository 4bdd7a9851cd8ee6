#include "kernels/cpu/adamw.hpp"

#include <cmath>

namespace meridian::kernels {

void adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n, const AdamWStep& s) {
  const float c1 = 1.0f / (1.0f - std::pow(s.beta1, static_cast<float>(s.t)));
  const float c2 = 1.0f / (1.0f - std::pow(s.beta2, static_cast<float>(s.t)));
  const float b1 = s.beta1, b2 = s.beta2, lr = s.lr, eps = s.eps, wd = s.weight_decay;
#pragma omp parallel for simd schedule(static)
  for (std::size_t i = 0; i < n; ++i) {
    const float g = grad[i];
    const float mi = b1 * m[i] + (1.0f - b1) * g;
    const float vi = b2 * v[i] + (1.0f - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    param[i] -= lr * ((mi * c1) / (std::sqrt(vi * c2) + eps) + wd * param[i]);
  }
}

}  // namespace meridian::kernels
