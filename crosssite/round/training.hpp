#pragma once
// What a round needs of the training under it: the working weights, the step, and a jump ahead.
// The Trainer in a real site (sites/replica), a synthetic trainer in the protocol simulator.
#include <cstdint>
#include <span>

namespace meridian {

class Training {
 public:
  virtual ~Training() = default;
  virtual std::span<float> weights() = 0;
  virtual std::int64_t step() const = 0;  // inner steps done
  // Goes on from inner step `step` (schedule and data), keeping the weights.
  virtual void fast_forward(std::int64_t step) = 0;
  // Tokens one inner step learns from, over the site's replicas.
  virtual std::int64_t tokens_per_step() const = 0;
};

}  // namespace meridian
