#pragma once
#include <functional>
#include <span>

#include "core/model/shard_map.hpp"

namespace meridian {

// Scales grads so that their global L2 norm is at most max_norm (no-op when max_norm <= 0 or the
// norm is already within it). Returns the norm before clipping; non-finite when grads are. The
// norm is added from each kShardUnit unit's sum of squares in unit order, so the sharded form
// below gives the same bits.
double clip_grad_norm(std::span<float> grads, double max_norm);

// The same when each replica holds a part of the reduced gradients (ZeRO): `part` of `grads`, cut
// on units. `gather_units` receives every unit's sum of squares with this replica's filled in and
// fills in the others' (an all-gather); every replica clips its part by the one global norm.
using UnitSumsGather = std::function<void(std::span<double> unit_sums)>;
double clip_grad_norm(std::span<float> grads, ShardRange part, double max_norm, const UnitSumsGather& gather_units);

}  // namespace meridian
