#pragma once
// What the model writes at a point of training ([log] sample_every): sample_tokens new tokens after
// sample_prompt at temperature 1, decoded through the job's tokenizer (or as bytes), for the
// `sample` event. A seed derived from the job's and the step's, recorded with the text, replays it
// with `meridian generate` on a checkpoint of that step.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>

#include "core/config/job_config.hpp"
#include "core/tokenizer/tokenizer_file.hpp"

namespace meridian {

struct TextSample {
  std::int64_t step = 0;
  std::uint64_t seed = 0;
  std::size_t prompt_tokens = 0;
  std::size_t tokens = 0;  // new tokens
  std::string text;        // the new text, bytes that are not UTF-8 as U+FFFD
  std::string error;       // why there is none (weights that are not finite): training goes on

  // The `sample` event's fields: step, seed, prompt_tokens, tokens, text or error.
  nlohmann::json fields() const;
};

TextSample sample_text(const JobConfig& config, std::span<const float> params,
                       const std::optional<TokenizerFile>& tokenizer, std::int64_t step);

}  // namespace meridian
