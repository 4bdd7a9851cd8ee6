// Activation recompute (core/model/recompute.hpp): with the norms and the MLP's activation
// recomputed ("cheap") or whole blocks ("full"), backward gives the gradients of keeping
// everything bit for bit, for GPT-2 and Llama (multi-head and grouped-query), and the activations
// held fall by what the plan leaves out.
#include <doctest/doctest.h>

#include <vector>

#include "core/model/language_model.hpp"
#include "core/util/rng.hpp"
#include "tests/support/model_checks.hpp"

using namespace meridian;

namespace {

ModelConfig shape_of(ModelFamily family, int n_head, int d_model) {
  ModelConfig c;
  c.family = family;
  c.n_layer = 3;
  c.n_head = n_head;
  c.n_kv_head = n_head;
  c.d_model = d_model;
  c.seq_len = 5;
  c.context = 5;
  c.vocab = 11;
  return c;
}

ModelConfig gpt_shape() { return shape_of(ModelFamily::Gpt2, 2, 8); }

ModelConfig llama_shape(int n_kv_head) {
  ModelConfig c = shape_of(ModelFamily::Llama, 4, 16);
  c.n_kv_head = n_kv_head;
  c.ffn_hidden = 24;
  c.rope_theta = 100;
  return c;
}

struct Pass {
  float loss = 0;
  std::vector<float> grads;
  std::size_t activation_bytes = 0;
};

// Two micro-batches of B = 3 with gradient accumulation, under `mode`.
Pass run(const ModelConfig& shape, Recompute mode) {
  auto model = make_model<float>(shape);
  model->init_weights(7);
  model->set_recompute(mode);
  const int B = 3;
  const auto n = static_cast<std::size_t>(B) * shape.seq_len;
  Pass out;
  for (std::uint64_t micro = 0; micro < 2; ++micro) {
    const auto inputs = testing::random_ids(n, shape.vocab, 10 + micro), targets = testing::random_ids(n, shape.vocab, 20 + micro);
    out.loss += model->forward(inputs.data(), targets.data(), B);
    model->backward(0.5f);
  }
  out.grads.assign(model->grads().begin(), model->grads().end());
  out.activation_bytes = model->activation_bytes();
  return out;
}

void check_family(const ModelConfig& shape, std::size_t cheap_floats_per_layer) {
  const auto none = run(shape, Recompute::None), cheap = run(shape, Recompute::Cheap), full = run(shape, Recompute::Full);
  CHECK(cheap.loss == none.loss);
  CHECK(full.loss == none.loss);
  CHECK(cheap.grads == none.grads);
  CHECK(full.grads == none.grads);
  // Cheap keeps one layer's slot of the norms' outputs and the activation output instead of L.
  const std::size_t BT = 3 * static_cast<std::size_t>(shape.seq_len);
  CHECK(none.activation_bytes - cheap.activation_bytes ==
        (shape.n_layer - 1) * BT * cheap_floats_per_layer * sizeof(float));
  CHECK(full.activation_bytes < cheap.activation_bytes);
}

}  // namespace

TEST_CASE("GPT-2: cheap and full recompute give the gradients of keeping everything, bit for bit, holding less") {
  const auto shape = gpt_shape();
  check_family(shape, 2 * shape.d_model + 4 * shape.d_model);  // ln_1, ln_2 and the GELU's output
}

TEST_CASE("Llama, multi-head and grouped-query: cheap and full recompute give the same gradients, holding less") {
  for (int kv : {4, 2}) {
    CAPTURE(kv);
    const auto shape = llama_shape(kv);
    check_family(shape, 2 * shape.d_model + shape.ffn_hidden);  // both RMSNorms' outputs and SwiGLU's
  }
}

TEST_CASE("switching the mode between steps keeps the model's results") {
  auto model = make_model<float>(gpt_shape());
  model->init_weights(3);
  const auto ids = testing::random_ids(10, 11, 1);
  const float before = model->forward(ids.data(), ids.data(), 2);
  model->set_recompute(Recompute::Full);
  CHECK(model->forward(ids.data(), ids.data(), 2) == before);
  model->backward();
  model->set_recompute(Recompute::None);
  CHECK(model->forward(ids.data(), ids.data(), 2) == before);
}
