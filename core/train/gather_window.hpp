#pragma once
// ZeRO stage 3 gathers the weights a range at a time as forward and backward reach them. Small
// layers would each cost a collective, so a gather reaches ahead, in the direction the pass is
// going, to at least kMinGatherRange elements (the layers after it in forward, before it in
// backward), and the ranges it brought in count as held until the model is done with them.
#include <cstddef>
#include <vector>

#include "core/model/shard_map.hpp"

namespace meridian {

inline constexpr std::size_t kMinGatherRange = std::size_t{1} << 20;

// The range to gather for `wanted` in a buffer of `total` elements: `wanted` stretched to `least`
// elements towards the end of the buffer when the pass moves forward (wanted starts at or after
// the previous range asked for), towards its start otherwise, within the buffer.
ShardRange gather_window(ShardRange wanted, std::size_t previous_offset, std::size_t total,
                         std::size_t least = kMinGatherRange);

// The ranges of the buffer held whole (gathered, not yet given back), as disjoint intervals.
class HeldRanges {
 public:
  bool covers(ShardRange range) const;
  void add(ShardRange range);
  void remove(ShardRange range);
  void clear() { held_.clear(); }

 private:
  std::vector<ShardRange> held_;  // sorted by offset, disjoint, not adjacent
};

}  // namespace meridian
