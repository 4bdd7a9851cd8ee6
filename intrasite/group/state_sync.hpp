#pragma once
// Healing at a generation boundary: the member with the most progress sends its training state
// (weights, step, data position, and the layers' extras) to every member over the communicator,
// so a restarted replica, or survivors that disagree on whether the last step completed, continue
// bit-identical. The records go as one small checkpoint; the weights and moments go straight from
// buffer to buffer, so a heal holds no copy of them.
//
// The optimizer's moments come whole from that member, unless some member holds only a part of
// them (ZeRO): then every member at that step gives its part, and parts no member holds (a dead
// replica's) come from the source's newest checkpoint on disk (as stale as it is: up to
// [checkpoint] every steps; the source reads the file once, or of a checkpoint in parts the part
// files that hold those units), or restart from zero without one. They are cut anew a window of units at a time, each
// member keeping what falls in its new part: beyond its old and new parts a member holds one window (kHealWindowUnits:
// 32 MiB of moments), not the whole model's moments (8 bytes per parameter). A member whose step failed in the
// all-gather is taken forward when another completed that step, and undoes its part of the update when none did. Under
// stage 2 that all-gather wrote the weights in place: every part then comes back from its owner, or a dead owner's from
// the rank that mirrored it.
//
// A member taking the source's weights in place holds no one step's state until the heal ends
// (Trainer::holds_torn_state): should the source die midway, the next heal takes that member for
// one holding nothing, and heals it from any member that holds a state. When none does, the
// group's state is lost (StateLost).
#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/train/trainer.hpp"
#include "intrasite/comm/communicator.hpp"

namespace meridian {

struct HealReport {
  int source_rank = 0;
  std::int64_t step = 0;         // the step every member now holds
  std::size_t bytes = 0;         // size of the state sent, and of the moments gathered
  bool changed = false;          // whether this member's weights were replaced by another's
  // Elements whose moments no member held: from the source's newest checkpoint (taken at
  // checkpoint_step), or, without one, restarted from zero (lost).
  std::size_t moments_from_checkpoint = 0;
  std::int64_t checkpoint_step = -1;
  std::size_t moments_lost = 0;
  // Weights no member could put back after an in-place all-gather (ZeRO stage 2) failed on every
  // member: an owner and the rank mirroring its part both died. They stay as the source held them.
  std::size_t weights_lost = 0;
  // The largest buffer the moments' re-cut held beyond the member's own parts (0: none was needed).
  std::size_t moments_scratch_bytes = 0;
  // Every member kept the first parts of the weights it was built with (ZeRO stage 3): nothing
  // moved, and none built the weights whole.
  bool first_parts_kept = false;
};

// Units (kShardUnit elements) of moments a heal re-cuts per sum: 4 Mi elements, 32 MiB of m and v.
inline constexpr std::size_t kHealWindowUnits = 1024;

// The trainer's place in the new group: set once the members' old parts have been collected.
struct GroupPlace {
  ReplicaSlot slot;
  int grad_accum = 1;
};

// Every member of the group holds a torn state: each was taking a source's state when that source
// died, and no member has a step's state to heal from. A peer's failure, but not one a new
// generation of the same members can heal: a replica process ends on it, to start again as any
// restarted replica does (from its newest checkpoint, or afresh).
class StateLost : public Error {
 public:
  using Error::Error;
};

HealReport sync_state(Communicator& comm, Trainer& trainer, std::optional<GroupPlace> place = std::nullopt,
                      std::size_t window_units = kHealWindowUnits);

}  // namespace meridian
