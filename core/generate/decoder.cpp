#include "core/generate/decoder.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/generate/family_decoders.hpp"
#include "core/util/error.hpp"
#include "kernels/cpu/fast_math.hpp"

namespace meridian {

Decoder::Decoder(const ModelConfig& config, std::span<const float> params, int window)
    : config_(config),
      layout_(ParamLayout::of(config)),
      params_(params),
      logits_(static_cast<std::size_t>(config.vocab)),
      window_(window),
      kv_width_(static_cast<std::size_t>(config.kv_heads()) * config.head_size()),
      keys_(static_cast<std::size_t>(config.n_layer)),
      values_(static_cast<std::size_t>(config.n_layer)) {
  MERIDIAN_CHECK(params.size() == layout_.total(), "params ", params.size(), " for a layout of ", layout_.total());
  MERIDIAN_CHECK(window >= 1 && window <= config.positions(), "window ", window, " of ", config.positions(),
                 " positions");
  for (int l = 0; l < config.n_layer; ++l) {
    keys_[l].resize(static_cast<std::size_t>(window) * kv_width_);
    values_[l].resize(static_cast<std::size_t>(window) * kv_width_);
  }
}

std::span<const float> Decoder::feed(std::span<const std::int32_t> tokens) {
  const int n = static_cast<int>(tokens.size());
  MERIDIAN_CHECK(n >= 1 && position_ + n <= window_, "feeding ", n, " tokens at position ", position_,
                 " of a window of ", window_);
  for (const std::int32_t t : tokens)
    MERIDIAN_CHECK(t >= 0 && t < config_.vocab, "token ", t, " of a vocabulary of ", config_.vocab);
  forward(tokens.data(), n, position_);
  position_ += n;
  return logits_;
}

void Decoder::cache(int layer, const float* k, const float* v, int ld, int n, int p) {
  for (int i = 0; i < n; ++i) {
    std::copy_n(k + static_cast<std::size_t>(i) * ld, kv_width_, keys_[layer].data() + (p + i) * kv_width_);
    std::copy_n(v + static_cast<std::size_t>(i) * ld, kv_width_, values_[layer].data() + (p + i) * kv_width_);
  }
}

// The training kernel's arithmetic (kernels/cpu/attention): scores scaled by 1/sqrt(hs), the row's
// maximum subtracted before the exponential, probabilities normalised, then the weighted values.
void Decoder::attend(float* out, const float* q, int ld, int layer, int n, int p) const {
  const int NH = config_.n_head, hs = config_.head_size(), group = NH / config_.kv_heads();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const float* K = keys_[layer].data();
  const float* V = values_[layer].data();
#pragma omp parallel
  {
    std::vector<float> prob(static_cast<std::size_t>(p + n));
#pragma omp for schedule(static)
    for (int ih = 0; ih < n * NH; ++ih) {
      const int i = ih / NH, h = ih % NH, keys = p + i + 1;
      const float* qi = q + static_cast<std::size_t>(i) * ld + h * hs;
      const std::size_t kv = static_cast<std::size_t>(h / group) * hs;
      float maxv = -INFINITY;
      for (int t = 0; t < keys; ++t) {
        const float* kt = K + t * kv_width_ + kv;
        float dot = 0;
        for (int d = 0; d < hs; ++d) dot += qi[d] * kt[d];
        prob[t] = dot * scale;
        maxv = std::max(maxv, prob[t]);
      }
      float sum = 0;
      for (int t = 0; t < keys; ++t) {
        prob[t] = kernels::fast_exp(prob[t] - maxv);
        sum += prob[t];
      }
      const float inv = 1.0f / sum;
      float* o = out + static_cast<std::size_t>(i) * NH * hs + h * hs;
      std::fill(o, o + hs, 0.0f);
      for (int t = 0; t < keys; ++t) {
        const float* vt = V + t * kv_width_ + kv;
        const float w = prob[t] * inv;
        for (int d = 0; d < hs; ++d) o[d] += w * vt[d];
      }
    }
  }
}

float* Decoder::scratch(int slot, std::size_t n, std::size_t width) {
  if (scratch_.size() <= static_cast<std::size_t>(slot)) scratch_.resize(static_cast<std::size_t>(slot) + 1);
  auto& s = scratch_[static_cast<std::size_t>(slot)];
  if (s.size() < n * width) s.resize(n * width);
  return s.data();
}

std::unique_ptr<Decoder> make_decoder(const ModelConfig& config, std::span<const float> params, int window) {
  if (config.family == ModelFamily::Llama) return std::make_unique<LlamaDecoder>(config, params, window);
  return std::make_unique<GptDecoder>(config, params, window);
}

}  // namespace meridian
