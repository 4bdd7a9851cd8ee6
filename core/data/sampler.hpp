#pragma once
// Deterministic, resumable sampling of training windows from a corpus of weighted sources.
#include <cstdint>
#include <vector>

#include "core/data/corpus.hpp"

namespace meridian {

// Where a sampler stands: the windows taken so far (by the whole group, or every site of a job),
// and how many of them came from each source. Checkpoints store it as is and seek() restores it.
struct SamplerPosition {
  std::uint64_t windows = 0;
  std::vector<std::uint64_t> taken;  // per source
  bool operator==(const SamplerPosition&) const = default;
};

// A source's shards are cut into windows of seq_len+1 tokens (inputs and the targets shifted by
// one) with stride seq_len, from an offset in [0, seq_len) drawn per (shard, epoch) from the seed;
// a window never spans two shards. A segment of n tokens gives floor(n / seq_len) - 1 windows
// whatever the offset. Each epoch of a source visits its windows in an order drawn from (seed,
// source, epoch) (RandomPermutation: no memory per window), and the next epoch follows.
//
// Position p of the job's sequence of windows goes to the source where frac(p * golden ratio)
// falls among the sources' cumulative weights: a low-discrepancy sequence, so that after n windows
// every source's share is within a few windows of its weight's, with no state but the counts.
//
// A group of `members` replicas (or sites) in lockstep takes B*members consecutive positions per
// step and member m those at m, m+members, ...: disjoint, and a group that changes size continues
// from the same position.
class WindowSampler {
 public:
  // Error(Data) naming the source when it does not fill one window.
  WindowSampler(const Corpus& corpus, int seq_len, std::uint64_t seed);

  // Fills inputs[B*seq_len] and targets[B*seq_len] with the next B windows.
  void next_batch(int B, std::int32_t* inputs, std::int32_t* targets) { next_group_batch(B, 0, 1, inputs, targets); }
  void next_group_batch(int B, int member, int members, std::int32_t* inputs, std::int32_t* targets);

  const SamplerPosition& position() const { return pos_; }
  // Restores a position; the batches that follow are those that followed it. Error(Data) when it
  // does not fit this corpus (another number of sources, or counts that do not add up). No
  // windows and no counts (a state that never trained) is the start.
  void seek(const SamplerPosition& pos);

  std::size_t source_of(std::uint64_t position) const;
  std::uint64_t windows_per_epoch(std::size_t source) const { return sources_[source].windows; }

 private:
  struct SourceWindows {
    std::uint64_t windows = 0;                 // in one epoch
    std::vector<std::uint64_t> first_window;   // per segment: the windows before it
    std::uint64_t threshold = 0;               // cumulative weight, scaled to 2^64 (the last: max)
  };
  // Copies window j (counted over all epochs) of source k into window[seq_len + 1].
  void copy_window(std::size_t k, std::uint64_t j, std::int32_t* window) const;

  Corpus corpus_;  // a copy: the shards are shared, the sources are a few vectors
  std::uint64_t seq_len_, seed_;
  std::vector<SourceWindows> sources_;
  SamplerPosition pos_;
  std::vector<std::int32_t> window_;
};

// Evaluation windows: consecutive, non-overlapping windows of seq_len+1 tokens from the start
// (stride seq_len+1), so no token is scored twice; a shorter tail is dropped.
std::size_t eval_window_count(std::size_t n_tokens, int seq_len);

}  // namespace meridian
