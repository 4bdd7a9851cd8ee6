#pragma once
// What a round needs of the training under it: the working weights, the step, and a jump ahead.
// The Trainer in a real site (sites/replica), a synthetic trainer in the protocol simulator.
#include <cstdint>
#include <optional>
#include <span>

#include "core/model/shard_map.hpp"

namespace meridian {

class Training {
 public:
  virtual ~Training() = default;
  virtual std::span<float> weights() = 0;
  // A sharded outer state's part and mirror of the weights, where the training holds just those
  // (ZeRO stage 3 under the same cut): the weights' buffer with both in place, nothing gathered,
  // its other values not to be read. Empty otherwise: the round reads weights() (whole) and shares
  // what it wrote over the site's group. After writing the part and mirror, held_written().
  virtual std::span<float> held(ShardRange part, std::optional<ShardRange> mirror) {
    (void)part;
    (void)mirror;
    return {};
  }
  virtual void held_written() {}
  virtual std::int64_t step() const = 0;  // inner steps done
  // Goes on from inner step `step` (schedule and data), keeping the weights.
  virtual void fast_forward(std::int64_t step) = 0;
  // Tokens one inner step learns from, over the site's replicas.
  virtual std::int64_t tokens_per_step() const = 0;
};

}  // namespace meridian
