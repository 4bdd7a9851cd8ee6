#pragma once
// Activation recompute: what backward recomputes instead of forward keeping it. The same kernels
// run again on the same inputs, so the gradients keep their bits and only the activations held
// shrink. A family sorts each block's activations into three kinds:
//   - kept: the residual stream between blocks (and all outside the blocks), always per layer;
//   - cheap: the norms' outputs and the MLP's activation output (llm.c's recompute levels),
//     recomputed from what the block keeps under "cheap" and "full";
//   - block: the rest, recomputed with the whole block from its input under "full".
// A kind that is not kept has one layer's slot, which backward refills before it reads it.
#include <cstddef>
#include <string_view>

namespace meridian {

enum class Recompute { None, Cheap, Full };
std::string_view to_string(Recompute r);

struct RecomputePlan {
  Recompute mode = Recompute::None;

  bool keeps_cheap() const { return mode == Recompute::None; }
  bool keeps_block() const { return mode != Recompute::Full; }
  // The slot layer l of each kind writes to, and how many slots each kind holds for n layers.
  std::size_t cheap_slot(int l) const { return keeps_cheap() ? static_cast<std::size_t>(l) : 0; }
  std::size_t block_slot(int l) const { return keeps_block() ? static_cast<std::size_t>(l) : 0; }
  std::size_t cheap_slots(int n) const { return keeps_cheap() ? static_cast<std::size_t>(n) : 1; }
  std::size_t block_slots(int n) const { return keeps_block() ? static_cast<std::size_t>(n) : 1; }
};

}  // namespace meridian
