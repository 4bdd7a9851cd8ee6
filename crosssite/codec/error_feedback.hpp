#pragma once
// Error feedback (residual accumulation) for lossy delta codecs: what quantization dropped from
// one round's delta is added to the next round's, so the sum of what was sent tracks the sum of
// the true deltas to within one quantization step instead of drifting as a random walk.
#include <cstddef>
#include <span>
#include <vector>

#include "crosssite/codec/codec.hpp"

namespace meridian {

// How much of the residual a codec's next delta carries (the rest is dropped). Sparse: 0.95
// (SparseLoCo's beta): its residual holds rounds-old progress that the site's weights keep too
// (OuterState::rebase), and fading it pulls the sites back toward the version; 1, 0.9 and 0.7
// measured worse (docs/quality.md). The others: 1, nothing dropped.
float feedback_decay(CodecKind kind);

class ErrorFeedback {
 public:
  explicit ErrorFeedback(std::size_t n, float decay = 1.0f);

  // Sends t = x + decay x residual and keeps residual = t - decode(encode(t)). x.size() must be
  // n. On Error(Data) (non-finite x) the residual is left as it was.
  std::vector<std::byte> encode(std::span<const float> x, const CodecOptions& options);

  std::span<const float> residual() const { return residual_; }
  std::size_t held_bytes() const { return (residual_.size() + sent_.size()) * sizeof(float); }
  void reset();
  // The residual a checkpoint kept (size n), or none (empty): start from zero.
  void restore(std::span<const float> residual);

 private:
  float decay_;
  std::vector<float> residual_;
  std::vector<float> sent_;  // scratch: x + residual, then its decoded value
};

}  // namespace meridian
