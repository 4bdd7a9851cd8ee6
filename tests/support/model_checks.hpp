#pragma once
// The checks every model family passes (tests/core/test_gpt.cpp, test_llama.cpp): the whole
// model's loss gradient against double-precision finite differences, the float model against the
// double one, and the ranges backward reports as final.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/language_model.hpp"
#include "core/util/rng.hpp"
#include "tests/kernels/gradcheck.hpp"

namespace meridian::testing {

inline std::vector<std::int32_t> random_ids(std::size_t n, int vocab, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> t(n);
  for (auto& x : t) x = static_cast<std::int32_t>(rng.below(vocab));
  return t;
}

// Every parameter's gradient within 1e-6 (relative to the largest) of central differences, and
// every tensor with some gradient. Weights get noise beyond the init so every path carries signal.
inline void check_model_gradient(const ModelConfig& shape, std::uint64_t seed) {
  const auto model = make_model<double>(shape);
  model->init_weights(seed);
  auto params = model->params();
  Rng rng(seed + 1);
  for (auto& p : params) p += 0.2 * rng.normal();
  const int B = 2;
  const auto inputs = random_ids(B * shape.seq_len, shape.vocab, seed + 2);
  const auto targets = random_ids(B * shape.seq_len, shape.vocab, seed + 3);
  model->zero_grads();
  model->forward(inputs.data(), targets.data(), B);
  model->backward();
  std::vector<double> analytic(model->grads().begin(), model->grads().end());
  std::vector<double> x(params.begin(), params.end());
  auto loss = [&] {
    std::copy(x.begin(), x.end(), params.begin());
    return model->forward(inputs.data(), targets.data(), B);
  };
  CHECK(gradcheck(x, analytic, loss) < 1e-6);
  for (const auto& v : model->layout().views()) {
    double norm = 0;
    for (std::size_t i = 0; i < v.numel; ++i) norm += std::abs(analytic[v.offset + i]);
    CHECK_MESSAGE(norm > 0, v.name);
  }
}

// The float model's loss within 1e-5, logits within 1e-4 and gradients within 1e-3 of the double one's.
inline void check_float_matches_double(const ModelConfig& shape, std::uint64_t seed) {
  const auto ref = make_model<double>(shape);
  ref->init_weights(seed);
  const auto model = make_model<float>(shape);
  std::copy(ref->params().begin(), ref->params().end(), model->params().begin());
  const int B = 3;
  const auto inputs = random_ids(B * shape.seq_len, shape.vocab, seed + 1);
  const auto targets = random_ids(B * shape.seq_len, shape.vocab, seed + 2);
  ref->zero_grads();
  model->zero_grads();
  const double ref_loss = ref->forward(inputs.data(), targets.data(), B);
  const float loss = model->forward(inputs.data(), targets.data(), B);
  CHECK(loss == doctest::Approx(ref_loss).epsilon(1e-5));
  CHECK(rel_diff(model->logits(), std::vector<double>(ref->logits().begin(), ref->logits().end())) < 1e-4);
  ref->backward();
  model->backward();
  CHECK(rel_diff(model->grads(), std::vector<double>(ref->grads().begin(), ref->grads().end())) < 1e-3);
}

// backward reports every range of the gradients once, each final when reported: `first` (the
// final norm's first tensor) first, the layers, and the embeddings (offset 0) last.
inline void check_backward_ranges(const ModelConfig& shape, const std::string& first) {
  const auto model = make_model<double>(shape);
  model->init_weights(31);
  const auto in = random_ids(2 * shape.seq_len, shape.vocab, 32), tg = random_ids(2 * shape.seq_len, shape.vocab, 33);
  model->zero_grads();
  model->forward(in.data(), tg.data(), 2);
  model->backward(1.0);
  const std::vector<double> final_grads(model->grads().begin(), model->grads().end());
  model->zero_grads();
  model->forward(in.data(), tg.data(), 2);
  std::vector<int> seen(model->layout().total(), 0);
  std::vector<std::size_t> starts;
  model->backward(1.0, [&](std::size_t offset, std::size_t count) {
    starts.push_back(offset);
    for (std::size_t i = offset; i < offset + count; ++i) {
      ++seen[i];
      CHECK(model->grads()[i] == final_grads[i]);  // nothing later in backward changes it
    }
  });
  for (int n : seen) CHECK(n == 1);
  REQUIRE(starts.size() == static_cast<std::size_t>(shape.n_layer) + 2);
  CHECK(starts.front() == model->layout().at(first).offset);
  CHECK(starts.back() == 0);
}

}  // namespace meridian::testing
