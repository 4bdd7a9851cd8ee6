// The whole model: loss gradient against double-precision finite differences, float against
// double, parameter layout, and deterministic initialisation.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "core/model/gpt.hpp"
#include "core/util/hash.hpp"
#include "core/util/rng.hpp"
#include "tests/kernels/gradcheck.hpp"

using namespace meridian;

namespace {

ModelConfig tiny_shape() { return ModelConfig{2, 2, 8, 6, 11}; }

std::vector<std::int32_t> random_tokens(std::size_t n, int vocab, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> t(n);
  for (auto& x : t) x = static_cast<std::int32_t>(rng.below(vocab));
  return t;
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
  const auto shape = tiny_shape();
  Gpt<double> model(shape);
  model.init_weights(3);
  // Larger weights than GPT-2's init so that every path carries a visible gradient.
  auto params = model.params();
  Rng rng(4);
  for (auto& p : params) p += 0.2 * rng.normal();
  const int B = 2;
  const auto inputs = random_tokens(B * shape.seq_len, shape.vocab, 5);
  const auto targets = random_tokens(B * shape.seq_len, shape.vocab, 6);

  model.zero_grads();
  model.forward(inputs.data(), targets.data(), B);
  model.backward();
  std::vector<double> analytic(model.grads().begin(), model.grads().end());
  std::vector<double> x(params.begin(), params.end());
  auto loss = [&] {
    std::copy(x.begin(), x.end(), params.begin());
    return model.forward(inputs.data(), targets.data(), B);
  };
  CHECK(testing::gradcheck(x, analytic, loss) < 1e-6);
  // every tensor got a gradient
  for (const auto& v : model.layout().views()) {
    double norm = 0;
    for (std::size_t i = 0; i < v.numel; ++i) norm += std::abs(analytic[v.offset + i]);
    CHECK_MESSAGE(norm > 0, v.name);
  }
}

TEST_CASE("float model matches the double model: loss, logits and gradients") {
  const auto shape = ModelConfig{2, 4, 32, 16, 37};
  Gpt<double> ref(shape);
  ref.init_weights(7);
  Gpt<float> model(shape);
  std::copy(ref.params().begin(), ref.params().end(), model.params().begin());
  const int B = 3;
  const auto inputs = random_tokens(B * shape.seq_len, shape.vocab, 8);
  const auto targets = random_tokens(B * shape.seq_len, shape.vocab, 9);
  ref.zero_grads();
  model.zero_grads();
  const double ref_loss = ref.forward(inputs.data(), targets.data(), B);
  const float loss = model.forward(inputs.data(), targets.data(), B);
  CHECK(loss == doctest::Approx(ref_loss).epsilon(1e-5));
  std::vector<double> ref_logits(ref.logits().begin(), ref.logits().end());
  CHECK(testing::rel_diff(model.logits(), ref_logits) < 1e-4);
  ref.backward();
  model.backward();
  std::vector<double> ref_grads(ref.grads().begin(), ref.grads().end());
  CHECK(testing::rel_diff(model.grads(), ref_grads) < 1e-3);
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
  const auto shape = tiny_shape();
  Gpt<double> model(shape);
  model.init_weights(31);
  const auto in = random_tokens(2 * shape.seq_len, shape.vocab, 32), tg = random_tokens(2 * shape.seq_len, shape.vocab, 33);
  model.zero_grads();
  model.forward(in.data(), tg.data(), 2);
  model.backward(1.0);
  const std::vector<double> final_grads(model.grads().begin(), model.grads().end());
  model.zero_grads();
  model.forward(in.data(), tg.data(), 2);
  std::vector<int> seen(model.layout().total(), 0);
  std::vector<std::size_t> starts;
  model.backward(1.0, [&](std::size_t offset, std::size_t count) {
    starts.push_back(offset);
    for (std::size_t i = offset; i < offset + count; ++i) {
      ++seen[i];
      CHECK(model.grads()[i] == final_grads[i]);  // nothing later in backward changes it
    }
  });
  for (int n : seen) CHECK(n == 1);
  REQUIRE(starts.size() == static_cast<std::size_t>(shape.n_layer) + 2);
  CHECK(starts.front() == model.layout().at("ln_f.weight").offset);
  CHECK(starts.back() == 0);
}
