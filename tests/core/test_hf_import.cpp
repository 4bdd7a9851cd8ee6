// Hugging Face directories into meridian's layout: what export writes reads back exactly (every
// family, tied or not, Qwen 2's biases, rope scaling, F32 and BF16), and every malformed directory
// is an Error(Data) that names the file and the tensor or key.
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/hf/hf_config.hpp"
#include "core/hf/hf_export.hpp"
#include "core/hf/hf_import.hpp"
#include "core/hf/safetensors.hpp"
#include "core/io/env.hpp"
#include "core/model/param_layout.hpp"
#include "core/util/error.hpp"
#include "core/util/rng.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::TempDir;
namespace fs = std::filesystem;

namespace {

ModelConfig llama(bool tied, bool qkv_bias = false) {
  ModelConfig c{2, 4, 16, 8, 50, ModelFamily::Llama, 32};
  c.n_kv_head = 2;
  c.ffn_hidden = 24;
  c.rope_theta = 500000;
  c.tied = tied;
  c.qkv_bias = qkv_bias;
  return c;
}

std::vector<float> random_params(const ModelConfig& c, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> p(ParamLayout::of(c).total());
  for (auto& x : p) x = static_cast<float>(rng.normal());
  return p;
}

void spill(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

nlohmann::json config_of(const fs::path& dir) { return nlohmann::json::parse(testing::file_text(dir / "config.json")); }
void set_config(const fs::path& dir, const nlohmann::json& j) { spill(dir / "config.json", j.dump()); }

// The message of the Error(Data) reading `dir` throws; fails the test if there is none.
std::string import_error(const fs::path& dir) {
  try {
    read_hf_model(dir);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Data);
    return e.what();
  }
  FAIL("no error for ", dir);
  return "";
}

// The exported tensors of `c`, as entries for write_safetensors, with `edit` applied to the list.
struct Tensors {
  ModelConfig config;
  std::vector<float> params;
  std::vector<SafetensorsEntry> entries;
  explicit Tensors(const ModelConfig& c) : config(c), params(random_params(c, 5)) {
    const ParamLayout layout = ParamLayout::of(c);
    for (const auto& v : layout.views())
      entries.push_back({hf_tensor_name(c, v.name), v.shape, layout.slice(std::span<const float>(params), v)});
  }
  void write(const fs::path& file) const { write_safetensors(posix_env(), file, entries, HfDtype::F32); }
};

bool contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return true;
  MESSAGE("\"", part, "\" is not in: ", text);
  return false;
}

}  // namespace

TEST_CASE("what export writes, import reads back: shape and every weight, for every family and layout") {
  TempDir dir("hf-import");
  ModelConfig scaled = llama(false);
  scaled.rope_scaling = {8, 1, 4, 16};
  const ModelConfig gpt2{2, 2, 8, 6, 11};
  for (const ModelConfig& c : {gpt2, llama(false), llama(true), llama(true, true), scaled}) {
    CAPTURE(describe(c));
    const auto params = random_params(c, 3);
    export_hf(c, params, dir / "hf");
    const HfModel back = read_hf_model(dir / "hf", c.seq_len);
    CHECK(back.config == c);
    CHECK(back.params == params);
    CHECK(weights_mismatch(model_config_from_hf(config_of(dir / "hf"), dir / "hf/config.json"), c).empty());
  }
}

TEST_CASE("a bf16 export imports as its weights rounded to nearest even, and again bit for bit") {
  TempDir dir("hf-import");
  const auto c = llama(false);
  const auto params = random_params(c, 4);
  export_hf(c, params, dir / "a", HfDtype::BF16);
  const HfModel a = read_hf_model(dir / "a", c.seq_len);
  for (std::size_t i = 0; i < params.size(); ++i) REQUIRE(a.params[i] == bf16_to_f32(f32_to_bf16(params[i])));
  export_hf(c, a.params, dir / "b", HfDtype::BF16);
  CHECK(testing::file_text(dir / "a/model.safetensors") == testing::file_text(dir / "b/model.safetensors"));
  CHECK(config_of(dir / "a").at("torch_dtype") == "bfloat16");
}

TEST_CASE("f16 converts exactly, subnormals, infinities and signed zeros included") {
  CHECK(f16_to_f32(0x3C00) == 1.0f);
  CHECK(f16_to_f32(0xC000) == -2.0f);
  CHECK(f16_to_f32(0x7BFF) == 65504.0f);
  CHECK(f16_to_f32(0x0001) == std::ldexp(1.0f, -24));
  CHECK(f16_to_f32(0x0200) == std::ldexp(1.0f, -15));
  CHECK(std::isinf(f16_to_f32(0xFC00)));
  CHECK(std::signbit(f16_to_f32(0x8000)));
  CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);  // a tie goes to even
  CHECK(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82);
}

TEST_CASE("GPT-2's names are read with or without \"transformer.\", a tied lm_head equal to wte is accepted") {
  TempDir dir("hf-import");
  const ModelConfig c{2, 2, 8, 6, 11};
  export_hf(c, random_params(c, 6), dir.path());
  Tensors t(c);
  for (auto& e : t.entries) e.name = e.name.substr(std::string("transformer.").size());
  t.entries.push_back({"lm_head.weight", t.entries.front().shape, t.entries.front().data});  // the tied copy
  t.entries.push_back({"h.0.attn.bias", {1, 1, 6, 6}, std::span<const float>(t.params).first(36)});  // a buffer
  t.write(dir / "model.safetensors");
  CHECK(read_hf_model(dir.path(), 6).params == t.params);
  t.entries[t.entries.size() - 2].data = std::span<const float>(t.params).subspan(1, t.entries.front().data.size());
  t.write(dir / "model.safetensors");
  CHECK(contains(import_error(dir.path()), "tensor 'lm_head.weight' differs from the embedding"));
}

TEST_CASE("config.json: an unknown or missing model_type, what meridian does not compute, a vocabulary beyond 31 bits") {
  TempDir dir("hf-import");
  const auto c = llama(false);
  export_hf(c, random_params(c, 7), dir.path());
  const nlohmann::json good = config_of(dir.path());
  const auto with = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json j = good;
    if (value.is_discarded()) j.erase(key);
    else j[key] = value;
    set_config(dir.path(), j);
    return import_error(dir.path());
  };
  const nlohmann::json erased = nlohmann::json::value_t::discarded;
  CHECK(contains(with("model_type", "bert"), "config.json: \"model_type\" is \"bert\": meridian imports gpt2"));
  CHECK(contains(with("model_type", erased), "config.json: missing \"model_type\""));
  CHECK(contains(with("hidden_act", "gelu"), "\"hidden_act\" is \"gelu\""));
  CHECK(contains(with("attention_bias", true), "\"attention_bias\" is true"));
  CHECK(contains(with("rope_scaling", {{"rope_type", "yarn"}, {"factor", 4}}), "rope_type \"yarn\""));
  // Llama 3's scaling needs each of its fields, as transformers does: a default would compute
  // another model (a missing factor once read as 0, no scaling at all: fuzz_hf). The field is named
  // (the nested object's reader once kept a path that had gone: fuzz_hf too).
  const nlohmann::json llama3 = {{"rope_type", "llama3"},
                                 {"factor", 8},
                                 {"low_freq_factor", 1},
                                 {"high_freq_factor", 4},
                                 {"original_max_position_embeddings", 32}};
  for (const char* field : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}) {
    nlohmann::json partial = llama3;
    partial.erase(field);
    CHECK(contains(with("rope_scaling", partial),
                   "config.json: \"rope_scaling\": missing \"" + std::string(field) + "\""));
  }
  nlohmann::json unscaled = llama3;
  unscaled["factor"] = 0;
  CHECK(contains(with("rope_scaling", unscaled),
                 "config.json: \"rope_scaling\": \"factor\" is 0, expected a number above 0"));
  CHECK(contains(with("head_dim", 8), "\"head_dim\" is 8"));
  CHECK(contains(with("num_hidden_layers", erased), "missing \"num_hidden_layers\""));
  CHECK(contains(with("vocab_size", 3000000000LL), "\"vocab_size\" is 3000000000, expected an integer from 1 to 2147483647"));
  CHECK(contains(with("num_key_value_heads", 3), "n_kv_head (3) must divide n_head (4)"));
  spill(dir / "config.json", "{not json");
  CHECK(contains(import_error(dir.path()), "config.json: not valid JSON"));
  fs::remove(dir / "config.json");
  CHECK(contains(import_error(dir.path()), "config.json: missing"));
}

TEST_CASE("weights: missing, extra and misshapen tensors, dtypes that are no weights, no file at all") {
  TempDir dir("hf-import");
  const auto c = llama(false);
  export_hf(c, random_params(c, 8), dir.path());
  const auto file = dir / "model.safetensors";
  {
    Tensors t(c);
    t.entries.erase(t.entries.begin() + 3);
    t.write(file);
    CHECK(contains(import_error(dir.path()), "tensor 'model.layers.0.self_attn.k_proj.weight' is missing"));
  }
  {
    Tensors t(c);
    t.entries.push_back({"model.layers.0.mlp.extra", {2}, std::span<const float>(t.params).first(2)});
    t.write(file);
    CHECK(contains(import_error(dir.path()), "model.safetensors: tensor 'model.layers.0.mlp.extra' is not part of"));
  }
  {
    Tensors t(c);
    t.entries[1].shape = {4, 4};  // input_layernorm.weight is [16]
    t.write(file);
    CHECK(contains(import_error(dir.path()), "tensor 'model.layers.0.input_layernorm.weight' has shape [4, 4], expected [16]"));
  }
  {  // an integer tensor where a weight belongs: a header naming dtype I32 with the same bytes
    Tensors t(c);
    t.write(file);
    std::string bytes = testing::file_text(file);
    const auto at = bytes.find("\"model.norm.weight\":{\"dtype\":\"F32\"");
    REQUIRE(at != std::string::npos);
    bytes.replace(bytes.find("F32", at), 3, "I32");
    spill(file, bytes);
    CHECK(contains(import_error(dir.path()), "tensor 'model.norm.weight' is I32; weights must be F32, BF16 or F16"));
  }
  fs::remove(file);
  CHECK(contains(import_error(dir.path()), "no model.safetensors or model.safetensors.index.json"));
}

TEST_CASE("a truncated file and a header that lies about offsets are errors naming the file") {
  TempDir dir("hf-import");
  const auto c = llama(true);
  export_hf(c, random_params(c, 9), dir.path());
  const auto file = dir / "model.safetensors";
  const std::string good = testing::file_text(file);
  spill(file, good.substr(0, good.size() - 10));
  CHECK(contains(import_error(dir.path()), "model.safetensors: tensor 'model.norm.weight': data_offsets"));
  CHECK(contains(import_error(dir.path()), "fall outside the"));
  std::string lying = good;
  const auto at = lying.find("\"data_offsets\":[0,");
  REQUIRE(at != std::string::npos);
  lying.replace(at, 18, "\"data_offsets\":[9,");
  spill(file, lying);
  CHECK(contains(import_error(dir.path()), "model.safetensors: tensor 'model.embed_tokens.weight': data_offsets [9,"));
}

TEST_CASE("shards: an index naming a missing shard, or a tensor its shard lacks, a tensor in two shards") {
  TempDir dir("hf-import");
  const auto c = llama(false);
  export_hf(c, random_params(c, 10), dir.path());
  fs::remove(dir / "model.safetensors");
  Tensors t(c);
  const auto half = static_cast<std::ptrdiff_t>(t.entries.size() / 2);
  write_safetensors(posix_env(), dir / "a.safetensors", std::span(t.entries).first(half), HfDtype::F32);
  write_safetensors(posix_env(), dir / "b.safetensors", std::span(t.entries).subspan(half), HfDtype::F32);
  nlohmann::json index = {{"metadata", nlohmann::json::object()}, {"weight_map", nlohmann::json::object()}};
  for (std::ptrdiff_t i = 0; i < static_cast<std::ptrdiff_t>(t.entries.size()); ++i)
    index["weight_map"][t.entries[i].name] = i < half ? "a.safetensors" : "b.safetensors";
  spill(dir / "model.safetensors.index.json", index.dump());
  CHECK(read_hf_model(dir.path(), 8).params == t.params);

  nlohmann::json missing = index;
  missing["weight_map"][t.entries[0].name] = "c.safetensors";
  spill(dir / "model.safetensors.index.json", missing.dump());
  CHECK(contains(import_error(dir.path()), "model.safetensors.index.json: names shard c.safetensors (for model.embed_tokens.weight), which is not in"));
  nlohmann::json wrong = index;
  wrong["weight_map"][t.entries[0].name] = "b.safetensors";
  spill(dir / "model.safetensors.index.json", wrong.dump());
  CHECK(contains(import_error(dir.path()), "names b.safetensors for tensor 'model.embed_tokens.weight', which that file does not hold"));
  write_safetensors(posix_env(), dir / "b.safetensors", std::span(t.entries).subspan(half - 1), HfDtype::F32);
  spill(dir / "model.safetensors.index.json", index.dump());
  CHECK(contains(import_error(dir.path()), "is also in"));
}
