#pragma once
// How the next token is chosen from a model's logits: greedy, or drawn from the softmax at a
// temperature, cut to the k most likely tokens (top-k) and to the fewest whose probability reaches
// p (nucleus, top-p). A pure function of (logits, options, generator state): a seed replays a sample.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/util/rng.hpp"

namespace meridian {

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy (the most likely token, the lowest id among equals)
  int top_k = 0;             // 0: every token
  double top_p = 1.0;        // in (0, 1]; 1: every token
};

// Every problem with the options, each a sentence naming its option (empty when usable).
std::vector<std::string> validate_sampling(const SamplingOptions& options);

// The next token. Error(Data) when a logit is not finite (the weights are not), naming the token.
// Draws one uniform number from `rng` unless greedy.
std::int32_t sample_token(std::span<const float> logits, const SamplingOptions& options, Rng& rng);

}  // namespace meridian
