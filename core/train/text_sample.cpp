#include "core/train/text_sample.hpp"

#include "core/generate/generator.hpp"
#include "core/util/error.hpp"
#include "core/util/rng.hpp"

namespace meridian {

namespace {

// Bytes that are not UTF-8 as U+FFFD: a byte-level model's text can hold any bytes, and the event
// log is JSON.
std::string as_utf8(const std::string& bytes) {
  return nlohmann::json::parse(nlohmann::json(bytes).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
      .get<std::string>();
}

}  // namespace

nlohmann::json TextSample::fields() const {
  nlohmann::json j = {{"step", step}, {"seed", seed}, {"prompt_tokens", prompt_tokens}, {"tokens", tokens}};
  if (error.empty())
    j["text"] = text;
  else
    j["error"] = error;
  return j;
}

TextSampler::TextSampler(const JobConfig& config, const std::optional<TokenizerFile>& tokenizer)
    : model_(config.model), job_seed_(config.job.seed), log_(config.log) {
  try {
    codec_.emplace(tokenizer ? std::optional<Tokenizer>(load_tokenizer(*tokenizer, "[data] tokenizer")) : std::nullopt,
                   model_.vocab, "the job's model");
  } catch (const Error& e) {
    error_ = e.what();
  }
}

TextSample TextSampler::sample(std::span<const float> params, std::int64_t step) const {
  TextSample s;
  s.step = step;
  s.seed = Rng::derive(job_seed_, static_cast<std::uint64_t>(step)).next_u64();
  s.error = error_;
  if (!codec_) return s;
  try {
    const auto prompt = codec_->prompt(log_.sample_prompt);
    GenerateOptions o;
    o.max_new_tokens = log_.sample_tokens;
    o.seed = s.seed;
    o.stop_token = codec_->end_of_text();
    const Generation g = generate(model_, params, prompt, o);
    s.prompt_tokens = prompt.size();
    s.tokens = g.tokens.size();
    s.text = as_utf8(codec_->decode(g.tokens));
  } catch (const Error& e) {
    s.error = e.what();
  }
  return s;
}

}  // namespace meridian
