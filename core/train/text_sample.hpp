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
#include "core/generate/text_codec.hpp"
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

// The job's tokenizer parsed once, for all the samples of a run.
class TextSampler {
 public:
  // `tokenizer`: the job's, as the trainer read it at start-up.
  TextSampler(const JobConfig& config, const std::optional<TokenizerFile>& tokenizer);
  TextSample sample(std::span<const float> params, std::int64_t step) const;

 private:
  ModelConfig model_;
  std::uint64_t job_seed_;
  JobConfig::Log log_;
  std::optional<TextCodec> codec_;
  std::string error_;  // why there is no codec: every sample says it
};

}  // namespace meridian
