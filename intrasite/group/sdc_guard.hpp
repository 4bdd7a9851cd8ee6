#pragma once
// Silent data corruption guard: every K steps the replicas of a group compare a 64-bit hash of
// their weights. With 3+ replicas the odd ones out are overwritten from a majority replica; with
// 2 (or no majority) everyone rolls back to the last state all replicas agreed on. The verdict is
// a pure function of the hashes; the guard applies it over the communicator.
//
// Under ZeRO stage 1 every replica still holds the whole weights, rewritten by each step's
// all-gather from the parts' owners, so the check compares the copies as they stand after it and
// an odd replica takes the majority's weights, keeping its own part's moments (nobody else holds
// them). A fault in an owner's update, or in its moments, reaches every copy alike and is not seen
// here; a copy's fault between two checks is overwritten by the next all-gather (its gradients
// meanwhile reach every replica, as any replica's do without sharding).
//
// Under stage 3 no two replicas hold the same weights: each part has two copies, its owner's and
// the mirror the next step's ring shift refreshes on the rank before it. The check compares the
// two copies of every part (judge_part_copies); a difference has no majority, so the group rolls
// back to the last agreed state. What it sees is what stage 1's check sees: a copy that went
// wrong since the last step; an owner's fault before its shift reaches both copies alike.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/train/trainer.hpp"
#include "intrasite/comm/communicator.hpp"

namespace meridian {

struct SdcVerdict {
  bool agree = true;
  std::vector<int> odd_ranks;  // disagreeing with the majority (empty on rollback)
  int source_rank = 0;         // a majority member, when there is a majority
  bool rollback = false;       // no majority (2 replicas, or a tie): back to the last agreed state
};

SdcVerdict judge_hashes(const std::vector<std::uint64_t>& hashes);
// ZeRO stage 3: each rank's hash of its part and of its mirror (the next rank's part). Every part
// has two copies, its owner's and its mirror's: any pair that differs is a rollback.
SdcVerdict judge_part_copies(const std::vector<std::uint64_t>& parts, const std::vector<std::uint64_t>& mirrors);

struct SdcOutcome {
  std::vector<std::uint64_t> hashes;  // by rank: of the weights, or at stage 3 of the rank's part
  std::vector<std::uint64_t> mirror_hashes;  // stage 3: of the rank's mirror
  SdcVerdict verdict;
  std::int64_t step = 0;  // the step every replica holds afterwards
};

class SdcGuard {
 public:
  // Compares hashes over `comm` and repairs. All members must call it at the same step.
  SdcOutcome check(Communicator& comm, Trainer& trainer);

  // The rollback target: the state of the last check all replicas agreed on (none before the first).
  std::optional<std::int64_t> agreed_step() const { return agreed_step_; }
  std::size_t held_bytes() const { return agreed_state_.size(); }
  // No agreed state until the next check: the one held was of another place in the group (under
  // ZeRO a replica's state holds its part's moments only).
  void forget() {
    agreed_state_.clear();
    agreed_step_.reset();
  }

 private:
  std::vector<std::byte> agreed_state_;
  std::optional<std::int64_t> agreed_step_;
};

}  // namespace meridian
