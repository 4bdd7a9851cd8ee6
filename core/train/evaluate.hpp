#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "core/model/language_model.hpp"

namespace meridian {

struct EvalResult {
  double loss = 0;          // mean next-token cross-entropy, nats/token
  std::size_t tokens = 0;   // predictions averaged over
  std::size_t windows = 0;
};

// Mean next-token loss over consecutive, non-overlapping windows of seq_len+1 tokens from the
// start of `tokens` (a shorter tail is dropped), at most max_windows of them (0 = all), run B at
// a time. The definition is deliberately simple so that another framework can reproduce it.
EvalResult evaluate(LanguageModel<float>& model, std::span<const std::int32_t> tokens, int B, std::size_t max_windows = 0);

// The same over any model: batch_loss(inputs, targets, n) is the mean loss of n sequences of
// seq_len tokens (a model on a GPU: core/train/device_step.hpp).
using BatchLoss = std::function<float(const std::int32_t* inputs, const std::int32_t* targets, int n)>;
EvalResult evaluate(const BatchLoss& batch_loss, int seq_len, std::span<const std::int32_t> tokens, int B,
                    std::size_t max_windows = 0);

}  // namespace meridian
