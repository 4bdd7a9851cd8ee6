// The trainer's samples of text ([log] sample_every): the draws' seed a function of the job's seed
// and the step, text that is always valid UTF-8 for the event log, and weights that are not finite
// an error in the event, never a failure of the run.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/model/language_model.hpp"
#include "core/train/text_sample.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_job.hpp"

using namespace meridian;
using meridian::testing::TempDir;

namespace {

std::vector<float> weights_of(const JobConfig& config, std::uint64_t seed, float scale) {
  auto model = make_model<float>(config.model);
  model->init_weights(seed);
  for (auto& w : model->params()) w *= scale;
  return {model->params().begin(), model->params().end()};
}

}  // namespace

TEST_CASE("a sample: sample_tokens of text after the prompt, its seed from the job's and the step's") {
  TempDir dir("text-sample");
  const auto config = testing::tiny_job(dir, "run", {"log.sample_tokens=40", "log.sample_prompt=\"KING:\""});
  const auto params = weights_of(config, 3, 8);  // large weights: the bytes range over all 256
  const TextSample a = TextSampler(config, std::nullopt).sample(params, 100);
  CHECK(a.error.empty());
  CHECK(a.prompt_tokens == 5);
  CHECK(a.tokens == 40);
  CHECK(a.step == 100);
  CHECK(TextSampler(config, std::nullopt).sample(params, 100).text == a.text);
  CHECK(TextSampler(config, std::nullopt).sample(params, 101).seed != a.seed);
  // Any byte may come out of a byte-level model; the event log writes JSON, which must be UTF-8.
  CHECK(a.text.find("\xEF\xBF\xBD") != std::string::npos);  // here some bytes were not UTF-8: U+FFFD
  CHECK_NOTHROW(a.fields().dump());
  CHECK(a.fields().at("text") == a.text);
  CHECK_FALSE(a.fields().contains("error"));
}

TEST_CASE("weights that are not finite give the sample an error, not the run") {
  TempDir dir("text-sample-nan");
  const auto config = testing::tiny_job(dir, "run");
  auto params = weights_of(config, 3, 1);
  params[params.size() - 1] = std::numeric_limits<float>::quiet_NaN();  // ln_f's bias: every logit
  const TextSample s = TextSampler(config, std::nullopt).sample(params, 7);
  CHECK(s.text.empty());
  CHECK(s.error.find("not finite") != std::string::npos);
  CHECK(s.fields().at("error") == s.error);
  CHECK_FALSE(s.fields().contains("text"));
}
