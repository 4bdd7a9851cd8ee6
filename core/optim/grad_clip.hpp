#pragma once
#include <span>

namespace meridian {

// Scales grads so that their global L2 norm is at most max_norm (no-op when max_norm <= 0 or the
// norm is already within it). Returns the norm before clipping; non-finite when grads are.
double clip_grad_norm(std::span<float> grads, double max_norm);

}  // namespace meridian
