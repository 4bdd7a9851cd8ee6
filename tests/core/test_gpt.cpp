// The whole model: loss gradient against double-precision finite differences, float against
// double, parameter layout, and deterministic initialisation.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "core/model/gpt.hpp"
#include "core/util/hash.hpp"
#include "core/util/rng.hpp"
#include "tests/kernels/gradcheck.hpp"
#include "tests/support/model_checks.hpp"

using namespace meridian;

namespace {

ModelConfig tiny_shape() { return ModelConfig{2, 2, 8, 6, 11}; }

std::vector<std::int32_t> random_tokens(std::size_t n, int vocab, std::uint64_t seed) {
  return testing::random_ids(n, vocab, seed);
}

}  // namespace

TEST_CASE("the reference shape has GPT-2's parameter count and a contiguous named layout") {
  const auto layout = ParamLayout::gpt(*find_model_preset("small"));
  CHECK(layout.total() == 834304);
  std::size_t next = 0;
  for (const auto& v : layout.views()) {
    CHECK(v.offset == next);
    next += v.numel;
  }
  CHECK(layout.at("h.3.mlp.c_proj.weight").shape == std::vector<std::int64_t>{512, 128});
  CHECK(layout.at("h.0.attn.c_attn.weight").decay);
  CHECK_FALSE(layout.at("h.0.attn.c_attn.bias").decay);
  CHECK_FALSE(layout.at("ln_f.weight").decay);

  CHECK(layout.at("h.2.mlp.c_fc.weight").layer == 2);
  CHECK(layout.at("wte.weight").layer == -1);

  const GptOffsets offsets = gpt_offsets(layout, 4);
  CHECK(offsets.wte == layout.at("wte.weight").offset);
  CHECK(offsets.wpe == layout.at("wpe.weight").offset);
  CHECK(offsets.lnf_bias == layout.at("ln_f.bias").offset);
  REQUIRE(offsets.layers.size() == 4);
  CHECK(offsets.layers[2][0] == layout.at("h.2.ln_1.weight").offset);
  CHECK(offsets.layers[2][4] == layout.at("h.2.attn.c_proj.weight").offset);
  CHECK(offsets.layers[3][11] == layout.at("h.3.mlp.c_proj.bias").offset);
}

TEST_CASE("whole-model loss gradient matches double-precision finite differences") {
  testing::check_model_gradient(tiny_shape(), 3);
}

TEST_CASE("float model matches the double model: loss, logits and gradients") {
  testing::check_float_matches_double(ModelConfig{2, 4, 32, 16, 37}, 7);
}

TEST_CASE("initialisation is a pure function of the seed, untrained loss is ~log(vocab)") {
  const auto shape = *find_model_preset("tiny");
  Gpt<float> a(shape), b(shape);
  a.init_weights(11);
  b.init_weights(11);
  CHECK(hash64(std::span<const float>(a.params())) == hash64(std::span<const float>(b.params())));
  b.init_weights(12);
  CHECK(hash64(std::span<const float>(a.params())) != hash64(std::span<const float>(b.params())));
  const auto tokens = random_tokens(2 * shape.seq_len + 1, shape.vocab, 13);
  const float loss = a.forward(tokens.data(), tokens.data() + 1, 2);
  CHECK(loss == doctest::Approx(std::log(256.0)).epsilon(0.02));
}

TEST_CASE("gradient accumulation: two half-scaled backwards equal one backward of the same batch twice") {
  const auto shape = tiny_shape();
  Gpt<double> model(shape);
  model.init_weights(21);
  const auto in = random_tokens(shape.seq_len, shape.vocab, 22), tg = random_tokens(shape.seq_len, shape.vocab, 23);
  model.zero_grads();
  model.forward(in.data(), tg.data(), 1);
  model.backward(1.0);
  std::vector<double> once(model.grads().begin(), model.grads().end());
  model.zero_grads();
  for (int i = 0; i < 2; ++i) {
    model.forward(in.data(), tg.data(), 1);
    model.backward(0.5);
  }
  CHECK(testing::rel_diff(model.grads(), once) < 1e-12);
}

TEST_CASE("backward reports every gradient range once, each final when reported, ln_f first and embeddings last") {
  testing::check_backward_ranges(tiny_shape(), "ln_f.weight");
}
