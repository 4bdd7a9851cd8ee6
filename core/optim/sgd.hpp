#pragma once
// Plain SGD over the flat parameter buffer: p -= lr * (g + weight_decay * p), the decay applied
// only to views marked for it (as AdamW does). Stateless; it exists as the inner optimizer under
// which one outer step of DiLoCo with H = 1 and outer lr 1 must equal a synchronous step.
#include <span>

#include "core/model/param_layout.hpp"

namespace meridian {

void sgd_step(const ParamLayout& layout, std::span<float> params, std::span<const float> grads, float lr,
              float weight_decay);

}  // namespace meridian
