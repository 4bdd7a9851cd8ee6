// Generation's speed on the CPU: a token decoded over the KV cache (core/generate) against the same
// token by running the whole window again (what a decoder without a cache does, nanoGPT's sample.py
// among them), and against one read of every weight (the floor for a token at batch 1, when the
// weights do not fit in cache). Timed in alternating rounds of the same process; medians.
//
//   bench_generate [preset ...]    (default: small llama-small gpt2)
#include <cstdio>
#include <string>
#include <vector>

#include "bench/stats.hpp"
#include "core/generate/decoder.hpp"
#include "core/model/language_model.hpp"
#include "core/util/rng.hpp"

using namespace meridian;
using bench::Clock;
using bench::median;
using bench::seconds_since;

namespace {

// Seconds of a pass that reads every weight once (a sum the compiler cannot drop).
double read_weights(std::span<const float> params) {
  const auto t0 = Clock::now();
  double sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static)
  for (std::size_t i = 0; i < params.size(); ++i) sum += params[i];
  const double s = seconds_since(t0);
  if (sum == 12345.678) std::printf("%f\n", sum);
  return s;
}

void bench_preset(const std::string& name) {
  const auto found = find_model_preset(name);
  if (!found) {
    std::fprintf(stderr, "bench_generate: no preset %s\n", name.c_str());
    return;
  }
  const ModelConfig shape = *found;
  auto model = make_model<float>(shape);
  model->init_weights(7);
  const std::span<const float> params = model->params();
  // Half the context as prompt, then new tokens: the cache's rows grow while the rounds run.
  const int window = shape.positions(), prompt = window / 2, rounds = 9, recompute_tokens = 3;
  Rng rng(1);
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(window));
  for (auto& t : tokens) t = static_cast<std::int32_t>(rng.below(shape.vocab));
  const auto cached = make_decoder(shape, params, window);
  const auto whole = make_decoder(shape, params, window);
  cached->feed(std::span<const std::int32_t>(tokens.data(), prompt));
  std::vector<double> per_token, per_recompute, per_read;
  for (int r = 0; r < rounds; ++r) {
    const int at = cached->position();
    const auto t0 = Clock::now();
    cached->feed(std::span<const std::int32_t>(&tokens[at], 1));
    per_token.push_back(seconds_since(t0));
    if (r < recompute_tokens) {
      whole->reset();
      const auto t1 = Clock::now();
      whole->feed(std::span<const std::int32_t>(tokens.data(), at + 1));
      per_recompute.push_back(seconds_since(t1));
    }
    per_read.push_back(read_weights(params));
  }
  // The window run again holds about prompt + 1 tokens: a prefill's rate too.
  const double token = median(per_token), recompute = median(per_recompute), read = median(per_read);
  std::printf(
      "%s: %s parameters, window %d, prompt %d: decode median %.2f ms/token (%.1f tokens/s); the window "
      "again %.2f ms/token (%.1fx slower; a prefill of %.0f tokens/s); one read of the weights %.2f ms "
      "(decode at %.2fx of it)\n",
      name.c_str(), with_commas(params.size()).c_str(), window, prompt, token * 1e3, 1 / token, recompute * 1e3,
      recompute / token, (prompt + 1) / recompute, read * 1e3, token / read);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> presets(argv + 1, argv + argc);
  if (presets.empty()) presets = {"small", "llama-small", "gpt2"};
  for (const auto& p : presets) bench_preset(p);
  return 0;
}
