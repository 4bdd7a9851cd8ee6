#pragma once
#include <cstddef>

namespace meridian::kernels {

struct AdamWStep {
  float lr;
  float beta1, beta2, eps;
  float weight_decay;  // decoupled: param -= lr * weight_decay * param (0 for biases and LayerNorm)
  int t;               // 1-based step count, for bias correction
};

// One AdamW update of n parameters in place (m, v are the moment buffers).
void adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n, const AdamWStep& s);

}  // namespace meridian::kernels
