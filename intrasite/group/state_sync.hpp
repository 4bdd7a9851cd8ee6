#pragma once
// Healing at a generation boundary: the member with the most progress sends its whole training
// state (weights, AdamW moments, step, data position) to every member over the communicator, so
// a restarted replica, or survivors that disagree on whether the last step completed, continue
// bit-identical. Nothing is read from disk.
#include <cstddef>
#include <cstdint>

#include "core/train/trainer.hpp"
#include "intrasite/comm/communicator.hpp"

namespace meridian {

struct HealReport {
  int source_rank = 0;
  std::int64_t step = 0;    // the step every member now holds
  std::size_t bytes = 0;    // size of the state sent
  bool changed = false;     // whether this member's state was replaced by another's
};

HealReport sync_state(Communicator& comm, Trainer& trainer);

}  // namespace meridian
