#pragma once
// Deterministic, resumable sampling of training windows, split into disjoint streams (one per
// replica or site, assigned by the layers above).
#include <cstdint>
#include <span>
#include <vector>

namespace meridian {

// Where a stream stands: `index` is the next position within this stream's share of `epoch`.
// Two integers, so checkpoints store it as is and seek() restores it exactly.
struct SamplerPosition {
  std::uint64_t epoch = 0;
  std::uint64_t index = 0;
  bool operator==(const SamplerPosition&) const = default;
};

// The token array is cut into windows of seq_len+1 tokens (inputs and the targets shifted by one)
// with stride seq_len, starting at a per-epoch offset in [0, seq_len) drawn from the seed, so
// epochs see different cuts. Each epoch visits its windows in an order shuffled from (seed, epoch);
// stream s of n takes positions i = s (mod n) of that order, so the n streams of an epoch are
// disjoint and together cover it.
//
// Every epoch has the same number of windows: those that fit whatever the offset, i.e.
// floor(tokens / seq_len) - 1. This loses at most one window per epoch and keeps positions
// comparable across epochs.
//
// The sampler views `tokens`; the caller keeps them alive.
class WindowSampler {
 public:
  // Throws ErrorKind::Data when the tokens cannot give every stream one window.
  WindowSampler(std::span<const std::int32_t> tokens, int seq_len, std::uint64_t seed, int stream = 0,
                int n_streams = 1);

  // Fills inputs[B*seq_len] and targets[B*seq_len] with the next B windows, rolling over epochs.
  void next_batch(int B, std::int32_t* inputs, std::int32_t* targets) { next_group_batch(B, 0, 1, inputs, targets); }

  // For a group of `members` replicas that share this stream in lockstep: the group's step takes
  // the next B*members windows, and member m gets those at positions m, m+members, m+2*members...
  // Every member advances the position by B*members, so the position stays the group's, and a
  // group that changes size (a replica lost or added) continues from the same window.
  void next_group_batch(int B, int member, int members, std::int32_t* inputs, std::int32_t* targets);

  SamplerPosition position() const { return pos_; }
  // Restores any position (any epoch); the batches that follow are those that followed it before.
  // Throws ErrorKind::Data when the index lies beyond this stream's share (other data or streams).
  void seek(const SamplerPosition& pos);

  // This stream's share of one epoch.
  std::uint64_t windows_per_epoch() const { return share_; }

 private:
  void load_epoch(std::uint64_t epoch);
  SamplerPosition advanced(SamplerPosition p, std::uint64_t by) const;

  std::span<const std::int32_t> tokens_;
  std::size_t seq_len_;
  std::uint64_t seed_;
  std::uint64_t stream_, n_streams_;
  std::uint64_t total_windows_;  // in one epoch, over all streams
  std::uint64_t share_;          // this stream's part of total_windows_
  SamplerPosition pos_;
  // Start offsets (into tokens_) of this stream's windows in the order of epoch loaded_epoch_;
  // rebuilt when the epoch changes rather than kept for every epoch.
  std::vector<std::size_t> starts_;
  std::uint64_t loaded_epoch_ = 0;
};

// Evaluation windows: consecutive, non-overlapping windows of seq_len+1 tokens from the start
// (stride seq_len+1), so no token is scored twice; a shorter tail is dropped.
std::size_t eval_window_count(std::size_t n_tokens, int seq_len);

}  // namespace meridian
