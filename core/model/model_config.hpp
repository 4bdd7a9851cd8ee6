#pragma once
// The shape of a model of one of the families meridian trains, and the named presets users pick
// from. GPT-2: learned positions, LayerNorm, GELU MLP of width 4C, biases, output head tied to the
// token embedding. Llama (and the Mistral and Qwen 2 layouts): rotary positions, RMSNorm, SwiGLU,
// grouped-query attention, no biases (Qwen 2's q/k/v biases excepted), tied or untied head.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meridian {

enum class ModelFamily { Gpt2, Llama };

std::string_view to_string(ModelFamily family);

// Llama 3.1's stretch of the rotary frequencies (Hugging Face's rope_type "llama3"): wavelengths
// beyond original_context / low_freq_factor are divided by `factor`, those below
// original_context / high_freq_factor kept, and the band between interpolated. factor 0: none.
struct RopeScaling {
  double factor = 0;
  double low_freq_factor = 1;
  double high_freq_factor = 4;
  int original_context = 8192;
  bool enabled() const { return factor > 0; }
  bool operator==(const RopeScaling&) const = default;
};

struct ModelConfig {
  int n_layer = 4;
  int n_head = 4;
  int d_model = 128;
  int seq_len = 64;  // the training and evaluation window, in tokens
  int vocab = 256;
  ModelFamily family = ModelFamily::Gpt2;
  // The positions the model supports (GPT-2: its learned position rows; Llama: Hugging Face's
  // max_position_embeddings); 0: seq_len. A model imported with a long context trains on shorter
  // windows without losing its position table.
  int context = 0;
  double norm_eps = 1e-5;  // LayerNorm's or RMSNorm's epsilon
  // Llama only.
  int n_kv_head = 0;    // key/value heads of grouped-query attention; 0: n_head (multi-head)
  int ffn_hidden = 0;   // SwiGLU's hidden width
  double rope_theta = 10000;
  RopeScaling rope_scaling{};
  bool tied = true;       // the output head is the token embedding (GPT-2 always)
  bool qkv_bias = false;  // Qwen 2: biases on the query, key and value projections

  int head_size() const { return d_model / n_head; }
  int kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  int positions() const { return context > 0 ? context : seq_len; }
  // Equal when they mean the same model: a derived field (0) equals its value spelled out.
  bool operator==(const ModelConfig& other) const;
};

struct ModelPreset {
  std::string_view name;
  ModelConfig shape;
  std::string_view note;
};

// All presets, GPT-2's then Llama's, each in size order.
const std::vector<ModelPreset>& model_presets();
std::optional<ModelConfig> find_model_preset(std::string_view name);

// Token ids are 32-bit signed integers end to end (data, sampler, embedding, loss), so a
// vocabulary holds at most 2^31 - 1 tokens.
inline constexpr std::int64_t kMaxVocab = 2147483647;

// Every problem with the shape, each a full sentence that starts with the key it is about (empty
// when the shape is usable).
std::vector<std::string> validate_model_config(const ModelConfig& c);

// What differs between two shapes for the weights of one to serve the other: every field but the
// training window (seq_len) and a Llama's context (its positions are computed, not learned).
// Empty when none; else the first difference as "<key> is A, not B".
std::string weights_mismatch(const ModelConfig& have, const ModelConfig& want);

// "llama: 4 layers, 4 heads (2 key/value), 128 channels, SwiGLU 352, context 64, vocab 256, untied"
std::string describe(const ModelConfig& c);

// 1235814400 -> "1,235,814,400"
std::string with_commas(std::uint64_t n);

}  // namespace meridian
