// The Llama family: loss gradient against double-precision finite differences (multi-head,
// grouped-query, tied, untied, Qwen 2's q/k/v biases), float against double, the layout and the
// presets' parameter counts, the rotary frequencies, and the order backward reports gradients in.
#include <doctest/doctest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "core/model/llama.hpp"
#include "core/util/hash.hpp"
#include "core/util/rng.hpp"
#include "tests/kernels/gradcheck.hpp"

using namespace meridian;

namespace {

ModelConfig llama_shape(int n_head, int n_kv_head, bool tied, bool qkv_bias = false) {
  ModelConfig c{2, n_head, 8, 5, 11, ModelFamily::Llama};
  c.n_kv_head = n_kv_head;
  c.ffn_hidden = 12;
  c.rope_theta = 100;
  c.tied = tied;
  c.qkv_bias = qkv_bias;
  return c;
}

std::vector<std::int32_t> random_tokens(std::size_t n, int vocab, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> t(n);
  for (auto& x : t) x = static_cast<std::int32_t>(rng.below(vocab));
  return t;
}

}  // namespace

TEST_CASE("the presets' parameter counts are those their models publish") {
  CHECK(ParamLayout::of(*find_model_preset("llama3.2-1b")).total() == 1235814400);
  CHECK(ParamLayout::of(*find_model_preset("llama3-8b")).total() == 8030261248);
  CHECK(ParamLayout::of(*find_model_preset("llama-debug")).total() == 6163712);
  CHECK(ParamLayout::of(*find_model_preset("llama-small")).total() == 803968);
  for (const auto& p : model_presets()) CHECK_MESSAGE(validate_model_config(p.shape).empty(), p.name);
}

TEST_CASE("a Llama's layout: Hugging Face's names and [out, in] shapes, q|k|v and gate|up adjacent") {
  const auto c = llama_shape(4, 2, false, true);
  const auto layout = ParamLayout::of(c);
  std::size_t next = 0;
  for (const auto& v : layout.views()) {
    CHECK(v.offset == next);
    next += v.numel;
  }
  CHECK(layout.views().front().name == "embed_tokens.weight");
  CHECK(layout.views().back().name == "lm_head.weight");
  CHECK(layout.at("layers.1.self_attn.k_proj.weight").shape == std::vector<std::int64_t>{4, 8});  // 2 heads of 2
  CHECK(layout.at("layers.1.self_attn.o_proj.weight").shape == std::vector<std::int64_t>{8, 8});
  CHECK(layout.at("layers.0.mlp.down_proj.weight").shape == std::vector<std::int64_t>{8, 12});
  const auto& q = layout.at("layers.0.self_attn.q_proj.weight");
  CHECK(layout.at("layers.0.self_attn.k_proj.weight").offset == q.offset + q.numel);
  CHECK(layout.at("layers.0.self_attn.v_proj.weight").offset == q.offset + q.numel + 32);
  const auto& gate = layout.at("layers.0.mlp.gate_proj.weight");
  CHECK(layout.at("layers.0.mlp.up_proj.weight").offset == gate.offset + gate.numel);
  CHECK_FALSE(layout.at("layers.0.self_attn.q_proj.bias").decay);
  CHECK_FALSE(layout.at("layers.0.input_layernorm.weight").decay);
  CHECK(layout.at("layers.0.mlp.up_proj.weight").layer == 0);
  CHECK(ParamLayout::of(llama_shape(4, 2, true)).find("lm_head.weight") == nullptr);
}

TEST_CASE("whole-model loss gradient matches double-precision finite differences") {
  struct Case {
    int n_head, n_kv_head;
    bool tied, qkv_bias;
  };
  for (const Case k : {Case{2, 2, false, false}, Case{4, 2, false, false}, Case{4, 1, true, false}, Case{2, 1, true, true}}) {
    CAPTURE(k.n_head);
    CAPTURE(k.n_kv_head);
    CAPTURE(k.tied);
    CAPTURE(k.qkv_bias);
    const auto shape = llama_shape(k.n_head, k.n_kv_head, k.tied, k.qkv_bias);
    Llama<double> model(shape);
    model.init_weights(3);
    auto params = model.params();
    Rng rng(4);
    for (auto& p : params) p += 0.2 * rng.normal();  // larger than the init so that every path carries a gradient
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
    for (const auto& v : model.layout().views()) {
      double norm = 0;
      for (std::size_t i = 0; i < v.numel; ++i) norm += std::abs(analytic[v.offset + i]);
      CHECK_MESSAGE(norm > 0, v.name);
    }
  }
}

TEST_CASE("float model matches the double model: loss, logits and gradients") {
  auto shape = llama_shape(4, 2, false);
  shape.d_model = 32;
  shape.ffn_hidden = 40;
  shape.seq_len = 16;
  shape.vocab = 37;
  Llama<double> ref(shape);
  ref.init_weights(7);
  Llama<float> model(shape);
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
  const auto shape = *find_model_preset("llama-small");
  Llama<float> a(shape), b(shape);
  a.init_weights(11);
  b.init_weights(11);
  CHECK(hash64(std::span<const float>(a.params())) == hash64(std::span<const float>(b.params())));
  b.init_weights(12);
  CHECK(hash64(std::span<const float>(a.params())) != hash64(std::span<const float>(b.params())));
  CHECK(a.params()[a.layout().at("norm.weight").offset] == 1.0f);
  const auto tokens = random_tokens(2 * shape.seq_len + 1, shape.vocab, 13);
  const float loss = a.forward(tokens.data(), tokens.data() + 1, 2);
  CHECK(loss == doctest::Approx(std::log(256.0)).epsilon(0.02));
}

TEST_CASE("backward reports every gradient range once, each final when reported: norm (and head) first, embedding last") {
  for (const bool tied : {false, true}) {
    CAPTURE(tied);
    const auto shape = llama_shape(4, 2, tied);
    Llama<double> model(shape);
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
        CHECK(model.grads()[i] == final_grads[i]);
      }
    });
    for (int n : seen) CHECK(n == 1);
    REQUIRE(starts.size() == static_cast<std::size_t>(shape.n_layer) + 2);
    CHECK(starts.front() == model.layout().at("norm.weight").offset);
    CHECK(starts.back() == 0);
  }
}

TEST_CASE("rotary frequencies: theta^(-2i/hs), and Llama 3.1's scaling as Hugging Face computes it") {
  ModelConfig c = *find_model_preset("llama3-8b");
  const auto plain = rope_inv_freq(c);
  REQUIRE(plain.size() == 64);
  CHECK(plain[0] == 1.0);
  CHECK(plain[10] == doctest::Approx(std::pow(500000.0, -20.0 / 128)).epsilon(1e-15));
  c.rope_scaling = {8, 1, 4, 8192};
  const auto scaled = rope_inv_freq(c);
  for (std::size_t i = 0; i < plain.size(); ++i) {
    const double wavelen = 2 * std::numbers::pi / plain[i];
    if (wavelen < 8192.0 / 4) CHECK(scaled[i] == plain[i]);                          // high frequencies kept
    else if (wavelen > 8192.0) CHECK(scaled[i] == doctest::Approx(plain[i] / 8));     // low ones stretched
    else CHECK((scaled[i] < plain[i] && scaled[i] > plain[i] / 8));                   // the band between
  }
}
