// Generation's loop: greedy and sampled tokens against the training model's forward over the same
// window at every step, through the window's slides; the stop token; a prompt longer than the model's
// positions; seeds; bad requests.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "core/generate/generator.hpp"
#include "core/model/language_model.hpp"
#include "core/util/error.hpp"
#include "tests/support/model_checks.hpp"

using namespace meridian;

namespace {

struct Model {
  ModelConfig shape;
  std::vector<float> params;
};

Model trained_looking(ModelFamily family, int context, std::uint64_t seed) {
  ModelConfig c{2, 4, 32, context, 29, family};
  if (family == ModelFamily::Llama) {
    c.n_kv_head = 2;
    c.ffn_hidden = 40;
  }
  auto model = make_model<float>(c);
  model->init_weights(seed);
  // Larger weights than the initialisation's, so that the logits differ clearly between tokens.
  for (auto& w : model->params()) w *= 3;
  return {c, {model->params().begin(), model->params().end()}};
}

// The logits after `held`, from the training model over exactly that window.
std::vector<float> logits_by_full_window(const Model& m, const std::vector<std::int32_t>& held) {
  ModelConfig c = m.shape;
  c.context = m.shape.positions();
  c.seq_len = static_cast<int>(held.size());
  auto model = make_model<float>(c);
  std::copy(m.params.begin(), m.params.end(), model->params().begin());
  model->forward(held.data(), nullptr, 1);
  const auto last = model->logits().subspan((held.size() - 1) * c.vocab, c.vocab);
  return {last.begin(), last.end()};
}

// Generation the slow way: the whole window run again for every token, sliding to its newest half
// when full, as generate() promises; the same draws from the same seed.
std::vector<std::int32_t> reference(const Model& m, std::vector<std::int32_t> held, const GenerateOptions& o) {
  const int window = std::min<int>(m.shape.positions(), static_cast<int>(held.size()) + o.max_new_tokens);
  Rng rng(o.seed);
  std::vector<std::int32_t> out;
  for (int i = 0; i < o.max_new_tokens; ++i) {
    out.push_back(sample_token(logits_by_full_window(m, held), o.sampling, rng));
    held.push_back(out.back());
    if (static_cast<int>(held.size()) > window) held.erase(held.begin(), held.end() - std::max(1, window / 2));
  }
  return out;
}

GenerateOptions greedy(int new_tokens) {
  GenerateOptions o;
  o.max_new_tokens = new_tokens;
  o.sampling.temperature = 0;
  return o;
}

}  // namespace

TEST_CASE("generation gives the tokens of the whole window recomputed at every step, through slides") {
  for (const auto family : {ModelFamily::Gpt2, ModelFamily::Llama}) {
    CAPTURE(to_string(family));
    const Model m = trained_looking(family, 12, 7);
    const std::vector<std::int32_t> prompt = {3, 1, 4, 1, 5};
    const Generation g = generate(m.shape, m.params, prompt, greedy(30));
    CHECK(g.tokens == reference(m, prompt, greedy(30)));
    CHECK(g.slides == 4);  // 12 held, back to 6: at the 8th, 15th, 22nd and 29th new token
    CHECK_FALSE(g.stopped);
    CHECK(g.prompt_unseen == 0);
    // Sampled, the same draws pick the same tokens: many of them, so every path of the model counts.
    GenerateOptions sampled;
    sampled.max_new_tokens = 30;
    sampled.seed = 5;
    const auto tokens = generate(m.shape, m.params, prompt, sampled).tokens;
    CHECK(tokens == reference(m, prompt, sampled));
    CHECK(std::set<std::int32_t>(tokens.begin(), tokens.end()).size() > 10);
  }
}

TEST_CASE("generation stops after the stop token, which it keeps, and streams each token as chosen") {
  const Model m = trained_looking(ModelFamily::Gpt2, 16, 8);
  GenerateOptions o;
  o.max_new_tokens = 12;
  o.sampling = {0.8, 0, 1.0};
  o.seed = 3;
  const Generation free = generate(m.shape, m.params, std::vector<std::int32_t>{7}, o);
  REQUIRE(free.tokens.size() == 12);
  o.stop_token = free.tokens[4];
  const auto first = std::find(free.tokens.begin(), free.tokens.end(), *o.stop_token) - free.tokens.begin();
  std::vector<std::int32_t> streamed;
  const Generation stopped =
      generate(m.shape, m.params, std::vector<std::int32_t>{7}, o, [&](std::int32_t t) { streamed.push_back(t); });
  CHECK(stopped.stopped);
  CHECK(stopped.tokens == std::vector<std::int32_t>(free.tokens.begin(), free.tokens.begin() + first + 1));
  CHECK(streamed == stopped.tokens);
}

TEST_CASE("a seed replays a sample, another seed samples another") {
  const Model m = trained_looking(ModelFamily::Llama, 16, 9);
  GenerateOptions o;
  o.max_new_tokens = 20;
  o.sampling = {1.0, 10, 0.9};
  const auto prompt = std::vector<std::int32_t>{1, 2};
  const auto a = generate(m.shape, m.params, prompt, o).tokens;
  CHECK(generate(m.shape, m.params, prompt, o).tokens == a);
  o.seed = 2;
  CHECK(generate(m.shape, m.params, prompt, o).tokens != a);
}

TEST_CASE("a prompt longer than the model's positions: its newest tokens are seen and the rest counted") {
  const Model m = trained_looking(ModelFamily::Gpt2, 8, 10);
  const auto prompt = testing::random_ids(20, m.shape.vocab, 4);
  const Generation g = generate(m.shape, m.params, prompt, greedy(3));
  CHECK(g.prompt_unseen == 12);
  CHECK(g.tokens == reference(m, std::vector<std::int32_t>(prompt.end() - 8, prompt.end()), greedy(3)));
}

TEST_CASE("an empty prompt, no new tokens or bad sampling options are usage errors naming the option") {
  const Model m = trained_looking(ModelFamily::Gpt2, 8, 11);
  const auto usage = [&](std::vector<std::int32_t> prompt, GenerateOptions o, const char* names) {
    try {
      generate(m.shape, m.params, prompt, o);
      FAIL("no error for ", names);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Usage);
      CHECK_MESSAGE(std::string(e.what()).find(names) != std::string::npos, e.what());
    }
  };
  usage({}, {}, "prompt");
  GenerateOptions none;
  none.max_new_tokens = 0;
  usage({1}, none, "max_new_tokens");
  GenerateOptions hot;
  hot.sampling.top_p = 0;
  usage({1}, hot, "top_p");
}
