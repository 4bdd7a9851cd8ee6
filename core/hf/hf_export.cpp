#include "core/hf/hf_export.hpp"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/hf/hf_config.hpp"
#include "core/hf/safetensors.hpp"
#include "core/io/atomic_write.hpp"
#include "core/io/env.hpp"
#include "core/model/param_layout.hpp"
#include "core/util/error.hpp"

namespace meridian {
namespace {

namespace fs = std::filesystem;

void write_text_atomically(Env& env, const fs::path& path, const std::string& text) {
  fs::path tmp = path;
  tmp += ".tmp";
  write_atomically(env, path, tmp, [&](WritableFile& file) { file.append(std::as_bytes(std::span(text.data(), text.size()))); });
}

std::string generation_config_json(const nlohmann::ordered_json& config) {
  nlohmann::ordered_json g = {{"_from_model_config", true}};
  for (const char* key : {"bos_token_id", "eos_token_id"})
    if (config.contains(key)) g[key] = config.at(key);
  return g.dump(2) + "\n";
}

}  // namespace

void export_hf(const ModelConfig& shape, std::span<const float> params, const fs::path& out_dir, HfDtype dtype) {
  const ParamLayout layout = ParamLayout::of(shape);
  MERIDIAN_CHECK(params.size() == layout.total(), "params hold ", params.size(), " floats, layout needs ",
                 layout.total());
  std::vector<SafetensorsEntry> entries;
  for (const auto& v : layout.views()) entries.push_back({hf_tensor_name(shape, v.name), v.shape, layout.slice(params, v)});
  const nlohmann::ordered_json config = hf_config_json(shape, dtype);

  Env& env = posix_env();
  env.create_dirs(out_dir);
  write_safetensors(env, out_dir / "model.safetensors", entries, dtype);
  write_text_atomically(env, out_dir / "config.json", config.dump(2) + "\n");
  write_text_atomically(env, out_dir / "generation_config.json", generation_config_json(config));
  env.sync_dir(out_dir);
}

void export_tokenizer(const TokenizerFile& tokenizer, const fs::path& out_dir, int context) {
  Env& env = posix_env();
  env.create_dirs(out_dir);
  const bool is_json = tokenizer.name.ends_with(".json");
  write_text_atomically(env, out_dir / (is_json ? std::string("tokenizer.json") : tokenizer.name), tokenizer.bytes);
  if (is_json) {
    nlohmann::ordered_json config = {{"tokenizer_class", "PreTrainedTokenizerFast"}, {"model_max_length", context}};
    const auto parsed = nlohmann::json::parse(tokenizer.bytes, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object() && parsed.contains("added_tokens") && parsed["added_tokens"].is_array())
      for (const auto& added : parsed["added_tokens"])
        if (const auto content = added.value("content", std::string());
            content == "<|endoftext|>" || content == "<|end_of_text|>")
          config["eos_token"] = config["bos_token"] = content;
    write_text_atomically(env, out_dir / "tokenizer_config.json", config.dump(2) + "\n");
  }
  env.sync_dir(out_dir);
}

}  // namespace meridian
