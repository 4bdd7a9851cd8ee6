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
#include "tests/support/model_checks.hpp"

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
  return testing::random_ids(n, vocab, seed);
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

TEST_CASE("whole-model loss gradient matches double-precision finite differences: MHA, GQA, MQA, tied, Qwen 2's biases") {
  struct Case {
    int n_head, n_kv_head;
    bool tied, qkv_bias;
  };
  for (const Case k : {Case{2, 2, false, false}, Case{4, 2, false, false}, Case{4, 1, true, false}, Case{2, 1, true, true}}) {
    CAPTURE(k.n_head);
    CAPTURE(k.n_kv_head);
    CAPTURE(k.tied);
    CAPTURE(k.qkv_bias);
    testing::check_model_gradient(llama_shape(k.n_head, k.n_kv_head, k.tied, k.qkv_bias), 3);
  }
}

TEST_CASE("float model matches the double model: loss, logits and gradients") {
  auto shape = llama_shape(4, 2, false);
  shape.d_model = 32;
  shape.ffn_hidden = 40;
  shape.seq_len = 16;
  shape.vocab = 37;
  testing::check_float_matches_double(shape, 7);
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
    testing::check_backward_ranges(llama_shape(4, 2, tied), "norm.weight");
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
