#pragma once
// The shape of a GPT-2 style model, and the named presets users pick from.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meridian {

struct GptConfig {
  int n_layer = 4;
  int n_head = 4;
  int d_model = 128;
  int seq_len = 64;  // maximum context; also the number of learned positions
  int vocab = 256;

  int head_size() const { return d_model / n_head; }
  bool operator==(const GptConfig&) const = default;
};

struct GptPreset {
  std::string_view name;
  GptConfig shape;
  std::string_view note;
};

// All presets, in size order.
const std::vector<GptPreset>& gpt_presets();
std::optional<GptConfig> find_gpt_preset(std::string_view name);

// Every problem with the shape, each a full sentence (empty when the shape is usable).
std::vector<std::string> validate_gpt_config(const GptConfig& c);

// "4 layers, 4 heads, 128 channels, context 64, vocab 256"
std::string describe(const GptConfig& c);

}  // namespace meridian
