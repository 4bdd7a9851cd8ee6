#include "core/train/text_sample.hpp"

#include "core/generate/generator.hpp"
#include "core/generate/text_codec.hpp"
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

TextSample sample_text(const JobConfig& config, std::span<const float> params,
                       const std::optional<TokenizerFile>& tokenizer, std::int64_t step) {
  TextSample s;
  s.step = step;
  s.seed = Rng::derive(config.job.seed, static_cast<std::uint64_t>(step)).next_u64();
  try {
    const TextCodec codec(
        tokenizer ? std::optional<Tokenizer>(load_tokenizer(*tokenizer, "[data] tokenizer")) : std::nullopt,
        config.model.vocab, "the job's model");
    const auto prompt = codec.prompt(config.log.sample_prompt);
    GenerateOptions o;
    o.max_new_tokens = config.log.sample_tokens;
    o.seed = s.seed;
    o.stop_token = codec.end_of_text();
    const Generation g = generate(config.model, params, prompt, o);
    s.prompt_tokens = prompt.size();
    s.tokens = g.tokens.size();
    s.text = as_utf8(codec.decode(g.tokens));
  } catch (const Error& e) {
    s.error = e.what();
  }
  return s;
}

}  // namespace meridian
