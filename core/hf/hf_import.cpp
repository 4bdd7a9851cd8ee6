#include "core/hf/hf_import.hpp"

#include <map>
#include <memory>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "core/hf/hf_config.hpp"
#include "core/hf/safetensors.hpp"
#include "core/io/env.hpp"
#include "core/model/param_layout.hpp"
#include "core/util/error.hpp"

namespace meridian {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const fs::path& file) {
  if (!fs::exists(file)) throw make_error(ErrorKind::Data, file.string(), ": missing");
  const std::vector<std::byte> bytes = posix_env().read_all(file);
  try {
    return nlohmann::json::parse(reinterpret_cast<const char*>(bytes.data()),
                                 reinterpret_cast<const char*>(bytes.data()) + bytes.size());
  } catch (const nlohmann::json::exception& e) {
    throw make_error(ErrorKind::Data, file.string(), ": not valid JSON: ", e.what());
  }
}

// Every tensor of the directory: which file holds it.
class TensorSource {
 public:
  explicit TensorSource(const fs::path& dir) {
    const fs::path index = dir / "model.safetensors.index.json";
    if (fs::exists(index)) {
      open_shards(dir, index);
      return;
    }
    const fs::path single = dir / "model.safetensors";
    if (!fs::exists(single))
      throw make_error(ErrorKind::Data, dir.string(), ": no model.safetensors or model.safetensors.index.json "
                       "(weights must be safetensors; pytorch_model.bin is not read)");
    add(std::make_shared<SafetensorsFile>(SafetensorsFile::open(single)));
  }

  const std::map<std::string, std::shared_ptr<SafetensorsFile>>& where() const { return where_; }

 private:
  void open_shards(const fs::path& dir, const fs::path& index) {
    const nlohmann::json j = read_json(index);
    if (!j.is_object() || !j.contains("weight_map") || !j.at("weight_map").is_object())
      throw make_error(ErrorKind::Data, index.string(), ": no \"weight_map\" object");
    std::map<std::string, std::shared_ptr<SafetensorsFile>> shards;
    for (const auto& [tensor, shard] : j.at("weight_map").items()) {
      if (!shard.is_string() || shard.get<std::string>().find('/') != std::string::npos)
        throw make_error(ErrorKind::Data, index.string(), ": weight_map[\"", tensor, "\"] is ", shard.dump(),
                         ", expected a file name in the directory");
      const std::string name = shard.get<std::string>();
      auto& file = shards[name];
      if (!file) {
        if (!fs::exists(dir / name))
          throw make_error(ErrorKind::Data, index.string(), ": names shard ", name, " (for ", tensor,
                           "), which is not in ", dir.string());
        file = std::make_shared<SafetensorsFile>(SafetensorsFile::open(dir / name));
        add(file);
      }
      if (!file->tensors().contains(tensor))
        throw make_error(ErrorKind::Data, index.string(), ": names ", name, " for tensor '", tensor,
                         "', which that file does not hold");
    }
  }

  void add(const std::shared_ptr<SafetensorsFile>& file) {
    for (const auto& [name, info] : file->tensors()) {
      const auto [it, fresh] = where_.emplace(name, file);
      if (!fresh)
        throw make_error(ErrorKind::Data, file->path().string(), ": tensor '", name, "' is also in ",
                         it->second->path().string());
    }
  }

  std::map<std::string, std::shared_ptr<SafetensorsFile>> where_;
};

// The names a tensor of meridian's layout may have in a checkpoint: GPT-2's with or without
// "transformer." (GPT2LMHeadModel's or GPT2Model's), a Llama's with "model.".
std::vector<std::string> candidate_names(const ModelConfig& c, const std::string& name) {
  if (c.family == ModelFamily::Gpt2) return {"transformer." + name, name};
  return {hf_tensor_name(c, name)};
}

// Buffers some checkpoints hold that transformers rebuilds: GPT-2's causal masks, old Llamas'
// rotary frequencies.
bool is_rebuilt_buffer(const std::string& name) {
  return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias") || name.ends_with("rotary_emb.inv_freq");
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// A tied model's checkpoint may hold its lm_head too; it must be the embedding it is tied to.
void check_tied_head(const TensorSource& source, const ModelConfig& c, const ParamLayout& layout,
                     const std::vector<float>& params, const std::string& head) {
  const auto& file = *source.where().at(head);
  const ParamView& embedding = layout.views().front();
  const auto& info = file.tensors().at(head);
  std::vector<float> values(info.numel);
  if (info.shape != embedding.shape)
    throw make_error(ErrorKind::Data, file.path().string(), ": tensor '", head, "' has shape ", shape_text(info.shape),
                     ", expected ", shape_text(embedding.shape));
  file.read_f32(head, values);
  if (!std::equal(values.begin(), values.end(), params.begin() + static_cast<std::ptrdiff_t>(embedding.offset)))
    throw make_error(ErrorKind::Data, file.path().string(), ": tensor '", head, "' differs from the embedding ",
                     "although config.json ties them (tie_word_embeddings); meridian's ", to_string(c.family),
                     " would train one matrix for both");
}

}  // namespace

bool is_hf_model_dir(const fs::path& dir) { return fs::is_directory(dir) && fs::exists(dir / "config.json"); }

HfModel read_hf_model(const fs::path& dir, int seq_len) {
  if (!fs::is_directory(dir)) throw make_error(ErrorKind::Data, dir.string(), ": not a directory");
  const fs::path config_file = dir / "config.json";
  HfModel out{model_config_from_hf(read_json(config_file), config_file, seq_len), {}};
  const ParamLayout layout = ParamLayout::of(out.config);
  out.params.assign(layout.total(), 0.0f);
  const TensorSource source(dir);
  std::set<std::string> used;
  for (const auto& v : layout.views()) {
    const auto names = candidate_names(out.config, v.name);
    std::optional<std::string> found;
    for (const auto& name : names)
      if (source.where().contains(name)) found = name;
    if (!found)
      throw make_error(ErrorKind::Data, dir.string(), ": tensor '", names.front(), "' is missing (",
                       describe(out.config), " needs it)");
    const SafetensorsFile& file = *source.where().at(*found);
    const auto& info = file.tensors().at(*found);
    if (info.shape != v.shape)
      throw make_error(ErrorKind::Data, file.path().string(), ": tensor '", *found, "' has shape ", shape_text(info.shape),
                       ", expected ", shape_text(v.shape), " (config.json: ", describe(out.config), ")");
    file.read_f32(*found, layout.slice(std::span<float>(out.params), v));
    used.insert(*found);
  }
  const std::string head = out.config.family == ModelFamily::Gpt2 ? "lm_head.weight" : hf_tensor_name(out.config, "lm_head.weight");
  for (const auto& [name, file] : source.where()) {
    if (used.contains(name) || is_rebuilt_buffer(name)) continue;
    if (name == head && out.config.tied) {
      check_tied_head(source, out.config, layout, out.params, head);
      continue;
    }
    throw make_error(ErrorKind::Data, file->path().string(), ": tensor '", name, "' is not part of ",
                     describe(out.config), " (an unknown or extra tensor)");
  }
  return out;
}

}  // namespace meridian
