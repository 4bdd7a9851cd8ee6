// The inner optimizers' cost on the reference shape (4 layers, 128 channels, T=64, B=8): a whole
// training step with AdamW and with Muon, and the optimizer update alone, timed in alternating
// runs of the same process so that both see the same machine. Prints medians over the runs and
// the ratios (Muon / AdamW); see bench/README.md.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <vector>

#include "bench/stats.hpp"
#include "core/data/sampler.hpp"
#include "core/data/tokens.hpp"
#include "core/model/gpt.hpp"
#include "core/optim/adamw.hpp"
#include "core/optim/grad_clip.hpp"
#include "core/optim/muon.hpp"

using namespace meridian;
using bench::Clock;
using bench::median;
using bench::seconds_since;

namespace {

struct Stepper {
  Gpt<float>& model;
  AdamW adamw;
  std::optional<Muon> muon;

  void update() {
    if (muon) muon->step(model.params(), model.grads(), adamw.m(), 1e-3f);
    adamw.step(model.params(), model.grads(), 1e-3f);
  }
};

Stepper make(Gpt<float>& model, bool muon) {
  const auto& layout = model.layout();
  if (!muon) return {model, AdamW(layout, AdamWOptions{}), std::nullopt};
  return {model, AdamW(layout, AdamWOptions{}, ranges_without_muon(layout)), Muon(layout, MuonOptions{})};
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 7;
  const int steps_per_run = argc > 2 ? std::atoi(argv[2]) : 20;
  const ModelConfig shape = *find_model_preset("small");
  const int B = 8;
  const Corpus corpus = Corpus::open({{std::filesystem::path(MERIDIAN_SOURCE_DIR) / "data/tinyshakespeare/input.txt", 1}},
                                     DataFormat::Text, shape.vocab);
  WindowSampler sampler(corpus, shape.seq_len, 1);
  std::vector<std::int32_t> inputs(B * shape.seq_len), targets(B * shape.seq_len);
  Gpt<float> model(shape);
  model.init_weights(1337);
  Stepper steppers[2] = {make(model, false), make(model, true)};
  const auto gradients = [&] {
    sampler.next_batch(B, inputs.data(), targets.data());
    model.zero_grads();
    model.forward(inputs.data(), targets.data(), B);
    model.backward();
    clip_grad_norm(model.grads(), 1.0);
  };
  // [optimizer][run]: seconds per whole step, and per update alone.
  std::vector<double> step_s[2], update_s[2];
  for (int i = 0; i < 3; ++i) {
    gradients();
    for (auto& s : steppers) s.update();  // warm caches and the thread pool
  }
  for (int r = 0; r < runs; ++r)
    for (int o = 0; o < 2; ++o) {
      double updates = 0;
      const auto t0 = Clock::now();
      for (int i = 0; i < steps_per_run; ++i) {
        gradients();
        const auto u0 = Clock::now();
        steppers[o].update();
        updates += seconds_since(u0);
      }
      step_s[o].push_back(seconds_since(t0) / steps_per_run);
      update_s[o].push_back(updates / steps_per_run);
    }
  const char* names[2] = {"adamw", "muon"};
  std::printf("reference shape: %s, B=%d, %zu parameters; %d alternating runs of %d steps\n", describe(shape).c_str(),
              B, model.layout().total(), runs, steps_per_run);
  for (int o = 0; o < 2; ++o)
    std::printf("%-6s step %.2f ms (median), update alone %.3f ms\n", names[o], 1e3 * median(step_s[o]),
                1e3 * median(update_s[o]));
  std::printf("muon / adamw: step %.3fx, update %.2fx\n", median(step_s[1]) / median(step_s[0]),
              median(update_s[1]) / median(update_s[0]));
  return 0;
}
