// meridian's models against the independent PyTorch implementation of tests/torch/hf_reference.py,
// given the same weights: every variant's Hugging Face directory (written by
// tests/torch/make_fixtures.py into the build tree before this runs; ctest's fixture "torch")
// imported, the next batch's logits within 1e-5 relative, ten AdamW steps (clip, decay groups,
// fresh moments) with every loss within 1e-5 relative (the first is PyTorch's next step after the
// 20 it trained), the decoder's logits fed text a token at a time, and a job with [model] init_from that starts from
// exactly the imported weights.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/generate/decoder.hpp"
#include "core/hf/hf_import.hpp"
#include "core/io/env.hpp"
#include "core/model/language_model.hpp"
#include "core/optim/adamw.hpp"
#include "core/optim/grad_clip.hpp"
#include "core/runlog/run_log.hpp"
#include "core/train/trainer.hpp"
#include "core/util/error.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_job.hpp"

using namespace meridian;
namespace fs = std::filesystem;

namespace {

const fs::path kFixtures = fs::path(MERIDIAN_BINARY_DIR) / "torch-fixtures";

nlohmann::json read_json(const fs::path& file) {
  std::ifstream in(file);
  REQUIRE_MESSAGE(in.good(), file.string(), " is missing: ctest runs tests/torch/make_fixtures.py first");
  return nlohmann::json::parse(in);
}

std::vector<std::int32_t> read_batches(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::int32_t> tokens(bytes.size() / sizeof(std::int32_t));
  std::memcpy(tokens.data(), bytes.data(), tokens.size() * sizeof(std::int32_t));
  return tokens;
}

// Windows k*B .. (k+1)*B - 1 of T+1 tokens, as inputs and targets.
void batch(const std::vector<std::int32_t>& all, int k, int B, int T, std::vector<std::int32_t>& in,
           std::vector<std::int32_t>& tg) {
  in.resize(static_cast<std::size_t>(B) * T);
  tg.resize(in.size());
  for (int b = 0; b < B; ++b) {
    const std::int32_t* w = all.data() + (static_cast<std::size_t>(k) * B + b) * (T + 1);
    std::copy(w, w + T, in.begin() + b * T);
    std::copy(w + 1, w + T + 1, tg.begin() + b * T);
  }
}

double relative(double got, double want) { return std::abs(got - want) / std::max(1e-30, std::abs(want)); }

std::vector<std::string> variants() { return read_json(kFixtures / "variants.json").get<std::vector<std::string>>(); }

}  // namespace

TEST_CASE("every variant: the imported model's logits equal PyTorch's within 1e-5, and ten AdamW steps' losses too") {
  for (const auto& name : variants()) {
    CAPTURE(name);
    const fs::path dir = kFixtures / name;
    const auto expected = read_json(dir / "expected.json");
    const int T = expected.at("seq_len"), B = expected.at("batch"), steps = expected.at("steps");
    const HfModel hf = read_hf_model(dir / "hf", T);
    const auto model = make_model<float>(hf.config);
    std::copy(hf.params.begin(), hf.params.end(), model->params().begin());
    const auto tokens = read_batches(dir / "batches.bin");
    REQUIRE(tokens.size() == static_cast<std::size_t>(steps) * B * (T + 1));
    std::vector<std::int32_t> in, tg;

    batch(tokens, 0, B, T, in, tg);
    model->forward(in.data(), nullptr, B);
    const auto want_logits = expected.at("logits").get<std::vector<double>>();
    const auto logits = model->logits();
    REQUIRE(logits.size() == want_logits.size());
    double scale = 0, worst = 0;
    for (std::size_t i = 0; i < logits.size(); ++i) {
      scale = std::max(scale, std::abs(want_logits[i]));
      worst = std::max(worst, std::abs(logits[i] - want_logits[i]));
    }
    CHECK(worst / scale < 1e-5);

    const auto& a = expected.at("adamw");
    AdamW opt(model->layout(), AdamWOptions{a.at("beta1").get<float>(), a.at("beta2").get<float>(),
                                            a.at("eps").get<float>(), a.at("weight_decay").get<float>()});
    const auto want_losses = expected.at("losses").get<std::vector<double>>();
    double worst_loss = 0;
    for (int k = 0; k < steps; ++k) {
      CAPTURE(k);
      batch(tokens, k, B, T, in, tg);
      model->zero_grads();
      const double loss = model->forward(in.data(), tg.data(), B);
      model->backward();
      clip_grad_norm(model->grads(), a.at("clip").get<double>());
      opt.step(model->params(), model->grads(), a.at("lr").get<float>());
      CHECK(relative(loss, want_losses[k]) < 1e-5);
      worst_loss = std::max(worst_loss, relative(loss, want_losses[k]));
    }
    MESSAGE(name, ": logits within ", worst / scale, ", ", steps, " AdamW steps' losses within ", worst_loss,
            " (relative)");
  }
}

TEST_CASE(
    "every variant: the decoder fed text a token at a time gives PyTorch's logits at every position within 1e-5") {
  for (const auto& name : variants()) {
    CAPTURE(name);
    const fs::path dir = kFixtures / name;
    const auto expected = read_json(dir / "expected.json").at("decode");
    const auto tokens = expected.at("tokens").get<std::vector<std::int32_t>>();
    const auto want = expected.at("logits").get<std::vector<double>>();
    const HfModel hf = read_hf_model(dir / "hf");
    const int V = hf.config.vocab, n = static_cast<int>(tokens.size());
    REQUIRE(want.size() == tokens.size() * V);
    const auto decoder = make_decoder(hf.config, hf.params, n);
    double scale = 0, worst = 0;
    for (int t = 0; t < n; ++t) {
      const auto logits = decoder->feed(std::span<const std::int32_t>(&tokens[t], 1));
      for (int v = 0; v < V; ++v) {
        scale = std::max(scale, std::abs(want[static_cast<std::size_t>(t) * V + v]));
        worst = std::max(worst, std::abs(logits[v] - want[static_cast<std::size_t>(t) * V + v]));
      }
    }
    CHECK(worst / scale < 1e-5);
    MESSAGE(name, ": ", n, " positions (", hf.config.positions(), " in the model), logits within ", worst / scale,
            " (relative)");
  }
}

TEST_CASE("[model] init_from a Hugging Face directory: the job's first weights are the imported ones, bit for bit") {
  testing::TempDir dir("init-from");
  const fs::path hf = kFixtures / "llama-small" / "hf";
  const auto config = testing::tiny_job(dir, "run", {"model.preset=\"llama-small\"", "model.init_from=\"" + hf.string() + "\""});
  RunLog log(config.job.run_dir);
  Trainer trainer(config, posix_env(), log, nullptr, testing::fake_clock);
  const HfModel imported = read_hf_model(hf, config.model.seq_len);
  const auto params = trainer.model().params();
  CHECK(std::equal(params.begin(), params.end(), imported.params.begin(), imported.params.end()));

  const auto other = testing::tiny_job(dir, "run2", {"model.init_from=\"" + hf.string() + "\""});  // a GPT-2 job
  try {
    Trainer refused(other, posix_env(), log, nullptr, testing::fake_clock);
    FAIL("a job whose [model] is another model started from it");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Config);
    CHECK(std::string(e.what()).find("family is llama, not gpt2") != std::string::npos);
  }
}
