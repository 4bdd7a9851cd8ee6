#pragma once
// What every replica of a site holds about the global model (DESIGN.md, steps 2 and 5): version
// v's weights, the outer optimizer's momentum and the error-feedback residual of this site's
// deltas. Every replica of a site runs the same deterministic code on the same inputs, so they all
// hold bit-identical copies and any of them can lead the site's cross-site exchange.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "sync/codec/codec.hpp"
#include "sync/codec/error_feedback.hpp"
#include "sync/outer/outer_optimizer.hpp"

namespace meridian {

class Checkpoint;

class OuterState {
 public:
  // Version 0 is `initial`, the weights every site starts from.
  OuterState(std::span<const float> initial, OuterOptions outer, CodecOptions codec, bool error_feedback);

  std::int64_t version() const { return version_; }
  std::span<const float> global() const { return global_; }
  std::size_t size() const { return global_.size(); }
  const CodecOptions& codec() const { return codec_; }

  // This site's pseudo-gradient against the global weights, delta = global - local, encoded; with
  // error feedback on, what the codec loses is carried into the next round's delta.
  std::vector<std::byte> encode_delta(std::span<const float> local);

  // The weights and momentum one commit produces from the current version, and their hash; the
  // state itself is untouched, so a proposer can hash its proposal before anyone agrees to it.
  struct Outcome {
    std::vector<float> global;
    OuterOptimizer optimizer;
    std::uint64_t hash = 0;
  };
  Outcome preview(std::span<const float> mean_delta) const;
  // Makes `outcome` version `version`, which must be version() + 1 (InvariantError otherwise).
  void commit(std::int64_t version, Outcome outcome);

  // Records "outer.*" of a training checkpoint, and back. Error(Checkpoint) on missing or
  // mis-sized records, state unchanged then.
  void save(Checkpoint& checkpoint) const;
  void restore(const Checkpoint& checkpoint);
  // XXH3-64 of the global weights: what a commit record carries.
  static std::uint64_t weights_hash(std::span<const float> weights);

 private:
  std::vector<float> global_;
  OuterOptimizer optimizer_;
  CodecOptions codec_;
  std::optional<ErrorFeedback> feedback_;
  std::vector<float> delta_;  // scratch
  std::int64_t version_ = 0;
};

}  // namespace meridian
