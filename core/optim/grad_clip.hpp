#pragma once
#include <functional>
#include <span>

namespace meridian {

// Scales grads so that their global L2 norm is at most max_norm (no-op when max_norm <= 0 or the
// norm is already within it). Returns the norm before clipping; non-finite when grads are.
double clip_grad_norm(std::span<float> grads, double max_norm);

// The same when each replica holds a part of the gradients (ZeRO): `sum_over_group` adds the
// parts' squared norms, so every replica clips its part by the one global norm it returns.
double clip_grad_norm(std::span<float> part, double max_norm, const std::function<double(double)>& sum_over_group);

}  // namespace meridian
