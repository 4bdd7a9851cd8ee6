#include "core/model/gpt_config.hpp"

#include <sstream>

namespace meridian {

const std::vector<GptPreset>& gpt_presets() {
  static const std::vector<GptPreset> presets = {
      {"tiny", {2, 2, 32, 32, 256}, "test-sized; trains in seconds"},
      {"small", {4, 4, 128, 64, 256}, "the reference shape of the benchmarks and the demo (834,304 parameters)"},
      {"medium", {6, 6, 384, 256, 256}, "a byte-level model for the larger Gutenberg experiments"},
      {"gpt2", {12, 12, 768, 1024, 50257}, "GPT-2 124M, for GPT-2-tokenized llm.c shards"},
      {"gpt2-medium", {24, 16, 1024, 1024, 50257}, "GPT-2 350M"},
  };
  return presets;
}

std::optional<GptConfig> find_gpt_preset(std::string_view name) {
  for (const auto& p : gpt_presets())
    if (p.name == name) return p.shape;
  return std::nullopt;
}

std::vector<std::string> validate_gpt_config(const GptConfig& c) {
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
  if (c.vocab > 65536)
    errors.push_back("vocab must be at most 65536 (tokens are stored as uint16), found " + std::to_string(c.vocab));
  return errors;
}

std::string describe(const GptConfig& c) {
  std::ostringstream out;
  out << c.n_layer << " layers, " << c.n_head << " heads, " << c.d_model << " channels, context " << c.seq_len
      << ", vocab " << c.vocab;
  return out.str();
}

}  // namespace meridian
