#pragma once
// Error feedback (residual accumulation) for lossy delta codecs: what quantization dropped from
// one round's delta is added to the next round's, so the sum of what was sent tracks the sum of
// the true deltas to within one quantization step instead of drifting as a random walk.
#include <cstddef>
#include <span>
#include <vector>

#include "sync/codec/codec.hpp"

namespace meridian {

class ErrorFeedback {
 public:
  explicit ErrorFeedback(std::size_t n);

  // Sends t = x + residual and keeps residual = t - decode(encode(t)). x.size() must be n. On
  // Error(Data) (non-finite x) the residual is left as it was.
  std::vector<std::byte> encode(std::span<const float> x, const CodecOptions& options);

  std::span<const float> residual() const { return residual_; }
  void reset();
  // The residual a checkpoint kept (size n), or none (empty): start from zero.
  void restore(std::span<const float> residual);

 private:
  std::vector<float> residual_;
  std::vector<float> sent_;  // scratch: x + residual, then its decoded value
};

}  // namespace meridian
