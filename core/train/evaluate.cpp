#include "core/train/evaluate.hpp"

#include <algorithm>
#include <vector>

#include "core/data/sampler.hpp"

namespace meridian {

EvalResult evaluate(LanguageModel<float>& model, std::span<const std::int32_t> tokens, int B, std::size_t max_windows) {
  const BatchLoss loss = [&](const std::int32_t* inputs, const std::int32_t* targets, int n) {
    return model.forward(inputs, targets, n);
  };
  return evaluate(loss, model.config().seq_len, tokens, B, max_windows);
}

EvalResult evaluate(const BatchLoss& batch_loss, int T, std::span<const std::int32_t> tokens, int B,
                    std::size_t max_windows) {
  std::size_t windows = eval_window_count(tokens.size(), T);
  if (max_windows > 0) windows = std::min(windows, max_windows);
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(B) * T), targets(inputs.size());
  double weighted = 0;
  for (std::size_t w0 = 0; w0 < windows; w0 += B) {
    const int n = static_cast<int>(std::min<std::size_t>(B, windows - w0));
    for (int i = 0; i < n; ++i) {
      const std::int32_t* src = tokens.data() + (w0 + i) * (T + 1);
      std::copy(src, src + T, inputs.begin() + i * T);
      std::copy(src + 1, src + T + 1, targets.begin() + i * T);
    }
    weighted += static_cast<double>(batch_loss(inputs.data(), targets.data(), n)) * n;
  }
  EvalResult r;
  r.windows = windows;
  r.tokens = windows * T;
  r.loss = windows ? weighted / static_cast<double>(windows) : 0.0;
  return r;
}

}  // namespace meridian
