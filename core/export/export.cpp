#include "core/export/export.hpp"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/io/atomic_write.hpp"
#include "core/io/env.hpp"
#include "core/model/param_layout.hpp"
#include "core/util/error.hpp"

namespace meridian {
namespace {

namespace fs = std::filesystem;

// Exports are written whole or not at all under their final names.
void write_chunks_atomically(Env& env, const fs::path& path, std::span<const std::span<const std::byte>> chunks) {
  fs::path tmp = path;
  tmp += ".tmp";
  write_atomically(env, path, tmp, [&](WritableFile& file) {
    for (auto chunk : chunks) file.append(chunk);
  });
}

std::string gpt2_config_json(const GptConfig& c) {
  // Token ids have no special meaning to meridian; GPT-2 puts <|endoftext|> last, so do we.
  const int end_of_text = c.vocab - 1;
  const nlohmann::ordered_json config = {
      {"model_type", "gpt2"},
      {"architectures", {"GPT2LMHeadModel"}},
      {"vocab_size", c.vocab},
      {"n_positions", c.seq_len},
      {"n_ctx", c.seq_len},
      {"n_embd", c.d_model},
      {"n_layer", c.n_layer},
      {"n_head", c.n_head},
      {"n_inner", nullptr},  // null means 4 * n_embd, the width meridian's MLP has
      {"activation_function", "gelu_new"},  // the tanh approximation, as in kernels/cpu/gelu.cpp
      {"layer_norm_epsilon", 1e-5},
      {"resid_pdrop", 0.0},
      {"embd_pdrop", 0.0},
      {"attn_pdrop", 0.0},
      {"initializer_range", 0.02},
      {"bos_token_id", end_of_text},
      {"eos_token_id", end_of_text},
      {"tie_word_embeddings", true},  // meridian's logits reuse wte, so there is no lm_head to save
      {"torch_dtype", "float32"},
  };
  return config.dump(2) + "\n";
}

std::span<const std::byte> bytes_of(std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); }

}  // namespace

void export_hf_gpt2(const GptConfig& shape, std::span<const float> params, const fs::path& out_dir) {
  const ParamLayout layout = ParamLayout::gpt(shape);
  MERIDIAN_CHECK(params.size() == layout.total(), "params hold ", params.size(), " floats, layout needs ",
                 layout.total());

  std::vector<SafetensorsEntry> entries;
  for (const auto& v : layout.views()) {
    entries.push_back({"transformer." + v.name, v.shape, layout.slice(params, v)});
  }
  const std::string prefix = safetensors_prefix(entries);
  std::vector<std::span<const std::byte>> chunks{bytes_of(prefix)};
  for (const auto& e : entries) chunks.push_back(std::as_bytes(e.data));

  const std::string config = gpt2_config_json(shape);
  const std::span<const std::byte> config_chunks[] = {bytes_of(config)};

  Env& env = posix_env();
  env.create_dirs(out_dir);
  write_chunks_atomically(env, out_dir / "model.safetensors", chunks);
  write_chunks_atomically(env, out_dir / "config.json", config_chunks);
  env.sync_dir(out_dir);
}

}  // namespace meridian
