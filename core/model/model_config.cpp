#include "core/model/model_config.hpp"

#include <cmath>
#include <sstream>

namespace meridian {

std::string_view to_string(ModelFamily family) { return family == ModelFamily::Llama ? "llama" : "gpt2"; }

bool ModelConfig::operator==(const ModelConfig& o) const {
  return n_layer == o.n_layer && n_head == o.n_head && d_model == o.d_model && seq_len == o.seq_len &&
         vocab == o.vocab && family == o.family && positions() == o.positions() && norm_eps == o.norm_eps &&
         kv_heads() == o.kv_heads() && ffn_hidden == o.ffn_hidden && rope_theta == o.rope_theta &&
         rope_scaling == o.rope_scaling && tied == o.tied && qkv_bias == o.qkv_bias;
}

namespace {

ModelConfig gpt2(int n_layer, int n_head, int d_model, int seq_len, int vocab, int context = 0) {
  ModelConfig c{n_layer, n_head, d_model, seq_len, vocab};
  c.context = context;
  return c;
}

struct LlamaShape {
  int n_layer, n_head, n_kv_head, d_model, ffn_hidden, seq_len, context, vocab;
  double rope_theta;
  bool tied;
};

ModelConfig llama(const LlamaShape& s, RopeScaling scaling = {}) {
  ModelConfig c{s.n_layer, s.n_head, s.d_model, s.seq_len, s.vocab, ModelFamily::Llama, s.context};
  c.n_kv_head = s.n_kv_head;
  c.ffn_hidden = s.ffn_hidden;
  c.rope_theta = s.rope_theta;
  c.rope_scaling = scaling;
  c.tied = s.tied;
  return c;
}

}  // namespace

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = {
      {"tiny", gpt2(2, 2, 32, 32, 256), "test-sized; trains in seconds"},
      {"small", gpt2(4, 4, 128, 64, 256), "the reference shape of the benchmarks and the demo (834,304 parameters)"},
      {"medium", gpt2(6, 6, 384, 256, 256), "a byte-level model for the larger Gutenberg experiments"},
      {"gpt2", gpt2(12, 12, 768, 1024, 50257, 1024), "GPT-2 124M, for GPT-2-tokenized llm.c shards"},
      {"gpt2-medium", gpt2(24, 16, 1024, 1024, 50257, 1024), "GPT-2 350M"},
      {"llama-small", llama({4, 4, 2, 128, 352, 64, 64, 256, 10000, false}),
       "a Llama of the demo's size: grouped-query attention (2 key/value heads), untied head, bytes"},
      {"llama-debug", llama({6, 16, 16, 256, 768, 2048, 2048, 2048, 500000, false}),
       "torchtitan's Llama 3 debug model"},
      {"llama3.2-1b", llama({16, 32, 8, 2048, 8192, 2048, 131072, 128256, 500000, true}, {32, 1, 4, 8192}),
       "Llama 3.2 1B (tied head; rope scaling as Hugging Face's config)"},
      {"llama3-8b", llama({32, 32, 8, 4096, 14336, 8192, 8192, 128256, 500000, false}), "Llama 3 8B"},
  };
  return presets;
}

std::optional<ModelConfig> find_model_preset(std::string_view name) {
  for (const auto& p : model_presets())
    if (p.name == name) return p.shape;
  return std::nullopt;
}

namespace {

void check_llama(const ModelConfig& c, std::vector<std::string>& errors) {
  if (c.n_kv_head < 0)
    errors.push_back("n_kv_head must be at least 1 (or 0: as many as n_head), found " + std::to_string(c.n_kv_head));
  else if (c.n_head >= 1 && c.n_head % c.kv_heads() != 0)
    errors.push_back("n_kv_head (" + std::to_string(c.kv_heads()) + ") must divide n_head (" +
                     std::to_string(c.n_head) + ")");
  if (c.ffn_hidden < 1) errors.push_back("ffn_hidden must be at least 1, found " + std::to_string(c.ffn_hidden));
  if (c.n_head >= 1 && c.d_model >= 1 && c.head_size() % 2 != 0)
    errors.push_back("d_model (" + std::to_string(c.d_model) + ") / n_head (" + std::to_string(c.n_head) +
                     ") must be even: rotary embeddings turn pairs of channels");
  if (!(c.rope_theta > 1) || !std::isfinite(c.rope_theta))
    errors.push_back("rope_theta must be a number > 1, found " + std::to_string(c.rope_theta));
  const RopeScaling& s = c.rope_scaling;
  if (s.factor < 0 || (s.enabled() && (!(s.low_freq_factor > 0) || !(s.high_freq_factor > s.low_freq_factor) ||
                                       s.original_context < 1)))
    errors.push_back("rope_scaling = \"llama3\" needs rope_factor > 0, 0 < rope_low_freq_factor < "
                     "rope_high_freq_factor and rope_original_context >= 1");
}

// Keys that only a Llama has, set on a GPT-2.
void check_gpt2(const ModelConfig& c, std::vector<std::string>& errors) {
  const ModelConfig defaults;
  if (c.n_kv_head != 0 && c.n_kv_head != c.n_head)
    errors.push_back("n_kv_head applies to family = \"llama\" only (GPT-2's attention has one key/value head per head)");
  if (c.ffn_hidden != 0 && c.ffn_hidden != 4 * c.d_model)
    errors.push_back("ffn_hidden applies to family = \"llama\" only (GPT-2's MLP is 4 x d_model wide)");
  if (!c.tied) errors.push_back("tied must be true for family = \"gpt2\" (GPT-2's output head is its token embedding)");
  if (c.qkv_bias) errors.push_back("qkv_bias applies to family = \"llama\" only (GPT-2 has every bias)");
  if (c.rope_theta != defaults.rope_theta)
    errors.push_back("rope_theta applies to family = \"llama\" only (GPT-2 learns its positions)");
  if (c.rope_scaling.enabled())
    errors.push_back("rope_scaling applies to family = \"llama\" only (GPT-2 learns its positions)");
  if (c.norm_eps != defaults.norm_eps)
    errors.push_back("norm_eps applies to family = \"llama\" only (GPT-2's LayerNorm epsilon is 1e-5)");
}

}  // namespace

std::vector<std::string> validate_model_config(const ModelConfig& c) {
  std::vector<std::string> errors;
  auto positive = [&](int v, const char* key) {
    if (v < 1) errors.push_back(std::string(key) + " must be at least 1, found " + std::to_string(v));
  };
  positive(c.n_layer, "n_layer");
  positive(c.n_head, "n_head");
  positive(c.d_model, "d_model");
  positive(c.seq_len, "seq_len");
  positive(c.vocab, "vocab");
  if (c.n_head >= 1 && c.d_model >= 1 && c.d_model % c.n_head != 0)
    errors.push_back("d_model (" + std::to_string(c.d_model) + ") must be divisible by n_head (" +
                     std::to_string(c.n_head) + ")");
  if (c.context < 0) errors.push_back("context must be at least 1 (or 0: seq_len), found " + std::to_string(c.context));
  else if (c.seq_len > c.positions())
    errors.push_back("seq_len (" + std::to_string(c.seq_len) + ") must be at most the model's context (" +
                     std::to_string(c.positions()) + ")");
  if (!(c.norm_eps > 0) || !std::isfinite(c.norm_eps))
    errors.push_back("norm_eps must be a number > 0, found " + std::to_string(c.norm_eps));
  if (c.family == ModelFamily::Llama) check_llama(c, errors);
  else check_gpt2(c, errors);
  return errors;
}

std::string weights_mismatch(const ModelConfig& have, const ModelConfig& want) {
  std::ostringstream out;
  auto differ = [&](const char* key, const auto& a, const auto& b) {
    if (a == b || !out.str().empty()) return;
    out << key << " is " << a << ", not " << b;
  };
  differ("family", to_string(have.family), to_string(want.family));
  differ("n_layer", have.n_layer, want.n_layer);
  differ("n_head", have.n_head, want.n_head);
  differ("n_kv_head", have.kv_heads(), want.kv_heads());
  differ("d_model", have.d_model, want.d_model);
  differ("ffn_hidden", have.ffn_hidden, want.ffn_hidden);
  differ("vocab", have.vocab, want.vocab);
  if (have.family == ModelFamily::Gpt2) differ("context", have.positions(), want.positions());  // a Llama's is no weight
  differ("norm_eps", have.norm_eps, want.norm_eps);
  differ("rope_theta", have.rope_theta, want.rope_theta);
  differ("rope_scaling.factor", have.rope_scaling.factor, want.rope_scaling.factor);
  differ("rope_scaling.low_freq_factor", have.rope_scaling.low_freq_factor, want.rope_scaling.low_freq_factor);
  differ("rope_scaling.high_freq_factor", have.rope_scaling.high_freq_factor, want.rope_scaling.high_freq_factor);
  differ("rope_scaling.original_context", have.rope_scaling.original_context, want.rope_scaling.original_context);
  differ("tied", have.tied, want.tied);
  differ("qkv_bias", have.qkv_bias, want.qkv_bias);
  return out.str();
}

std::string describe(const ModelConfig& c) {
  std::ostringstream out;
  out << to_string(c.family) << ": " << c.n_layer << " layers, " << c.n_head << " heads";
  if (c.family == ModelFamily::Llama && c.kv_heads() != c.n_head) out << " (" << c.kv_heads() << " key/value)";
  out << ", " << c.d_model << " channels";
  if (c.family == ModelFamily::Llama) out << ", SwiGLU " << c.ffn_hidden;
  out << ", context " << c.seq_len;
  if (c.positions() != c.seq_len) out << " of " << c.positions();
  out << ", vocab " << c.vocab;
  if (c.family == ModelFamily::Llama) out << (c.tied ? ", tied" : ", untied");
  if (c.qkv_bias) out << ", q/k/v biases";
  return out.str();
}

std::string with_commas(std::uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace meridian
