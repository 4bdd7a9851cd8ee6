// The KV-cached decoder against the training model's forward pass over the whole window: the logits
// after every chunk of tokens fed equal the model's at that position, for GPT-2 and the Llama
// family's layouts (grouped-query, multi-query, tied, untied, Qwen 2's biases, Llama 3.1's rope
// scaling), past the training window up to the model's positions too.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/generate/decoder.hpp"
#include "core/model/language_model.hpp"
#include "core/util/error.hpp"
#include "tests/support/model_checks.hpp"

using namespace meridian;

namespace {

ModelConfig gpt_shape(int seq_len, int context) {
  ModelConfig c{2, 4, 32, seq_len, 61, ModelFamily::Gpt2};
  c.context = context;
  return c;
}

ModelConfig llama_shape(int n_kv_head, bool tied, bool qkv_bias, bool scaled) {
  ModelConfig c{2, 4, 32, 24, 61, ModelFamily::Llama};
  c.n_kv_head = n_kv_head;
  c.ffn_hidden = 40;
  c.rope_theta = 500;
  c.tied = tied;
  c.qkv_bias = qkv_bias;
  if (scaled) c.rope_scaling = {4.0, 1.0, 4.0, 8};
  return c;
}

// The logits of the whole window at every position, from the training model.
std::vector<float> full_logits(const ModelConfig& c, const std::vector<float>& params,
                               const std::vector<std::int32_t>& tokens) {
  auto model = make_model<float>(c);
  std::copy(params.begin(), params.end(), model->params().begin());
  model->forward(tokens.data(), nullptr, 1);
  const auto l = model->logits();
  return {l.begin(), l.end()};
}

std::vector<float> init_params(const ModelConfig& c, std::uint64_t seed) {
  auto model = make_model<float>(c);
  model->init_weights(seed);
  // Biases and norm gains away from 0 and 1, so that a misplaced one shows.
  Rng rng(seed + 1);
  for (const auto& v : model->layout().views())
    if (v.shape.size() == 1)
      for (std::size_t i = 0; i < v.numel; ++i) model->params()[v.offset + i] += static_cast<float>(0.1 * rng.normal());
  return {model->params().begin(), model->params().end()};
}

// Feeds `tokens` in chunks of the given sizes (the last repeated) and compares each chunk's logits
// with the full window's at its last position.
void check_against_full(const ModelConfig& c, std::uint64_t seed, const std::vector<int>& chunks) {
  const auto params = init_params(c, seed);
  const auto tokens = testing::random_ids(static_cast<std::size_t>(c.seq_len), c.vocab, seed + 2);
  const auto full = full_logits(c, params, tokens);
  const auto decoder = make_decoder(c, params, c.seq_len);
  float worst = 0, largest = 0;
  std::size_t fed = 0, next_chunk = 0;
  while (fed < tokens.size()) {
    const std::size_t n = std::min<std::size_t>(chunks[std::min(next_chunk++, chunks.size() - 1)], tokens.size() - fed);
    const auto logits = decoder->feed(std::span<const std::int32_t>(tokens.data() + fed, n));
    fed += n;
    REQUIRE(decoder->position() == static_cast<int>(fed));
    const float* want = full.data() + (fed - 1) * c.vocab;
    for (int v = 0; v < c.vocab; ++v) {
      worst = std::max(worst, std::abs(logits[v] - want[v]));
      largest = std::max(largest, std::abs(want[v]));
    }
  }
  INFO(describe(c), ": largest logit ", largest, ", worst difference ", worst);
  CHECK(largest > 0.05f);  // the comparison is of something
  CHECK(worst <= 2e-5f * std::max(1.0f, largest));
}

}  // namespace

TEST_CASE("GPT-2: the cached decoder's logits equal the whole window's at every position, fed in any chunks") {
  for (const auto& chunks : std::vector<std::vector<int>>{{1}, {5, 1, 1, 3, 2}, {16}, {7, 9}}) {
    CAPTURE(chunks.size());
    check_against_full(gpt_shape(16, 0), 11, chunks);
  }
}

TEST_CASE("GPT-2: positions past the training window, up to the model's context") {
  // Trained on windows of 8, its position table has 24 rows: the decoder reads them all.
  ModelConfig c = gpt_shape(24, 24);
  check_against_full(c, 12, {3, 1, 8, 1});
  const auto params = init_params(c, 12);
  c.seq_len = 8;
  CHECK(make_decoder(c, params, 24)->window() == 24);
}

TEST_CASE(
    "the Llama family: grouped-query, multi-query and multi-head, tied and untied, Qwen 2's biases, Llama 3.1's "
    "scaling") {
  check_against_full(llama_shape(2, false, false, false), 21, {4, 1, 1, 6});
  check_against_full(llama_shape(1, true, false, false), 22, {1});
  check_against_full(llama_shape(4, false, true, false), 23, {24});
  check_against_full(llama_shape(2, true, true, true), 24, {2, 3, 1});
}

TEST_CASE("reset starts again at position 0 with the same results, and the window is a hard bound") {
  const ModelConfig c = llama_shape(2, false, false, false);
  const auto params = init_params(c, 31);
  const auto decoder = make_decoder(c, params, 6);
  const std::vector<std::int32_t> tokens = {1, 2, 3, 4, 5, 6};
  const auto fed = decoder->feed(tokens);
  const std::vector<float> first(fed.begin(), fed.end());
  CHECK_THROWS_AS(decoder->feed(tokens), InvariantError);  // would be positions 6-11 of a window of 6
  decoder->reset();
  CHECK(decoder->position() == 0);
  const auto again = decoder->feed(tokens);
  CHECK(std::equal(first.begin(), first.end(), again.begin()));
  decoder->reset();
  const std::int32_t beyond = c.vocab;
  CHECK_THROWS_AS(decoder->feed(std::span<const std::int32_t>(&beyond, 1)), InvariantError);
  CHECK_THROWS_AS(make_decoder(c, params, c.positions() + 1), InvariantError);
}
