#pragma once
// Text generation's loop over a Decoder: the prompt fed at once, then each new token sampled and
// fed back. Past the model's positions the window slides: the newest half of the tokens is fed
// again from position 0 and generation goes on (the crop nanoGPT and llm.c make, by halves so that
// the cache is refilled once per half window rather than every token).
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "core/generate/sampling.hpp"
#include "core/model/model_config.hpp"

namespace meridian {

struct GenerateOptions {
  int max_new_tokens = 256;
  SamplingOptions sampling;
  std::uint64_t seed = 1;
  std::optional<std::int32_t> stop_token;  // generation ends after it (end of text)
};

struct Generation {
  std::vector<std::int32_t> tokens;  // the new tokens, a stop token included
  std::size_t prompt_unseen = 0;     // the prompt's first tokens that never fitted the window
  int slides = 0;                    // times the window slid
  bool stopped = false;              // ended on the stop token, not the length
};

// Error(Usage) for an empty prompt, options that validate_sampling refuses or max_new_tokens below 1;
// the prompt's ids must be below the vocabulary (an InvariantError otherwise: check them first).
// `on_token` sees each new token as it is chosen.
Generation generate(const ModelConfig& config, std::span<const float> params, std::span<const std::int32_t> prompt,
                    const GenerateOptions& options, const std::function<void(std::int32_t)>& on_token = {});

}  // namespace meridian
