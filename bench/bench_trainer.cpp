// Training throughput of the CPU trainer on a preset (the reference shape "small" unless named: 4
// layers, 4 heads, 128 channels, vocab 256, T=64; "llama-small" is the Llama of its size), B=8,
// fp32, AdamW, against the machine's single-precision GEMM peak measured in the same run. Prints
// medians of several timed runs; see bench/README.md for the method.
//   bench_trainer [runs] [steps_per_run] [preset]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include <cblas.h>

#include "bench/flops.hpp"
#include "bench/stats.hpp"
#include "core/data/sampler.hpp"
#include "core/data/tokens.hpp"
#include "core/model/language_model.hpp"
#include "core/optim/adamw.hpp"
#include "core/optim/grad_clip.hpp"
#include "core/util/aligned_vector.hpp"

using namespace meridian;
using bench::Clock;
using bench::median;
using bench::seconds_since;

namespace {

// Peak: the sustained rate of a large square SGEMM (n = 1024), median over repeats.
double sgemm_peak_gflops(int repeats) {
  const int n = 1024;
  AlignedVector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.0f);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  std::vector<double> rates;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < 4; ++i)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                  c.data(), n);
    rates.push_back(4 * 2.0 * n * n * n / seconds_since(t0) / 1e9);
  }
  return median(rates);
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 5;
  const int steps_per_run = argc > 2 ? std::atoi(argv[2]) : 30;
  const char* preset = argc > 3 ? argv[3] : "small";
  const auto found = find_model_preset(preset);
  if (!found) {
    std::fprintf(stderr, "bench_trainer: no preset %s\n", preset);
    return 2;
  }
  const ModelConfig shape = *found;
  const int B = 8;
  const std::filesystem::path data = std::filesystem::path(MERIDIAN_SOURCE_DIR) / "data/tinyshakespeare/input.txt";
  const Corpus corpus = Corpus::open({{data, 1}}, DataFormat::Text, shape.vocab);
  WindowSampler sampler(corpus, shape.seq_len, 1);
  std::vector<std::int32_t> inputs(B * shape.seq_len), targets(B * shape.seq_len);

  const auto model = make_model<float>(shape);
  model->init_weights(1337);
  AdamW opt(model->layout(), AdamWOptions{});
  auto step = [&] {
    sampler.next_batch(B, inputs.data(), targets.data());
    model->zero_grads();
    model->forward(inputs.data(), targets.data(), B);
    model->backward();
    clip_grad_norm(model->grads(), 1.0);
    opt.step(model->params(), model->grads(), 1e-3f);
  };

  for (int i = 0; i < 5; ++i) step();  // warm caches and the thread pool
  // The peak is measured between the training runs, so that both medians see the same machine.
  std::vector<double> rates, peaks;
  for (int r = 0; r < runs; ++r) {
    peaks.push_back(sgemm_peak_gflops(3));
    const auto t0 = Clock::now();
    for (int i = 0; i < steps_per_run; ++i) step();
    rates.push_back(steps_per_run * static_cast<double>(B * shape.seq_len) / seconds_since(t0));
  }
  const double tok_s = median(rates), peak = median(peaks);
  const double gflops = tok_s / (B * shape.seq_len) * bench::train_flops_per_step(shape, B) / 1e9;
  std::printf("preset %s: %s, B=%d, %zu parameters\n", preset, describe(shape).c_str(), B, model->layout().total());
  std::printf("sgemm peak (1024^3, median over the runs): %.1f GFLOP/s\n", peak);
  std::printf("training: median %.0f tokens/s over %d runs of %d steps (min %.0f, max %.0f)\n", tok_s, runs,
              steps_per_run, *std::min_element(rates.begin(), rates.end()),
              *std::max_element(rates.begin(), rates.end()));
  std::printf("achieved: %.1f GFLOP/s = %.0f%% of the measured sgemm peak\n", gflops, 100.0 * gflops / peak);
  return 0;
}
