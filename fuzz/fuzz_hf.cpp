// A Hugging Face model's files as `meridian import` and `[model] init_from` read them, from a
// download nobody vouches for. The first byte picks the file: a safetensors file (its 8-byte
// header length, the JSON header's names, dtypes, shapes and offsets, the data) from a file under
// /dev/shm, config.json's text, or a whole directory (config.json, an optional index, the
// weights); the second byte is the training window asked for.
// Promises checked: a safetensors file that opens gives tensors whose bytes lie in the file, are
// their shape's values of their dtype and never overlap; F32, BF16 and F16 read as that many
// values, any other dtype is refused with Error(Data). A config.json taken is a valid shape, and
// written out again (hf_config_json) it reads as the same shape. A directory that imports gives
// the layout's values, which exported and imported again are the same bits.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "core/hf/hf_config.hpp"
#include "core/hf/hf_export.hpp"
#include "core/hf/hf_import.hpp"
#include "core/hf/safetensors.hpp"
#include "core/model/param_layout.hpp"
#include "fuzz/fuzz_common.hpp"

namespace {

using namespace meridian;

std::size_t dtype_size(const std::string& dtype) {
  if (dtype == "BOOL" || dtype == "U8" || dtype == "I8" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
  if (dtype == "I16" || dtype == "U16" || dtype == "F16" || dtype == "BF16") return 2;
  if (dtype == "I32" || dtype == "U32" || dtype == "F32") return 4;
  MERIDIAN_FUZZ_EXPECT(dtype == "I64" || dtype == "U64" || dtype == "F64", "a tensor of dtype ", dtype, " was taken");
  return 8;
}

void safetensors(std::span<const std::byte> bytes) {
  const meridian::fuzz::TempFile file("model.safetensors", bytes);
  try {
    const SafetensorsFile opened = SafetensorsFile::open(file.path());
    std::vector<std::span<const std::byte>> held;
    for (const auto& [name, t] : opened.tensors()) {
      std::uint64_t numel = 1;
      for (const auto d : t.shape) {
        MERIDIAN_FUZZ_EXPECT(d >= 0, name, ": shape holds ", d);
        numel *= static_cast<std::uint64_t>(d);
      }
      MERIDIAN_FUZZ_EXPECT(numel == t.numel, name, ": ", t.numel, " values for a shape of ", numel);
      MERIDIAN_FUZZ_EXPECT(t.bytes.size() == t.numel * dtype_size(t.dtype), name);
      if (!t.bytes.empty()) held.push_back(t.bytes);
      std::vector<float> values(t.numel);
      try {
        opened.read_f32(name, values);
        MERIDIAN_FUZZ_EXPECT(t.dtype == "F32" || t.dtype == "BF16" || t.dtype == "F16", name, " read as ", t.dtype);
      } catch (const Error& e) {
        MERIDIAN_FUZZ_EXPECT(e.kind() == ErrorKind::Data && t.dtype != "F32" && t.dtype != "BF16" && t.dtype != "F16",
                             name, ": ", e.what());
      }
    }
    // The tensors, in file order, are the data buffer after the header: every byte of it, once.
    std::sort(held.begin(), held.end(), [](auto a, auto b) { return a.data() < b.data(); });
    std::uint64_t header = 0;
    std::memcpy(&header, bytes.data(), sizeof header);
    std::size_t at = sizeof header + header;
    for (const auto t : held) {
      MERIDIAN_FUZZ_EXPECT(t.data() == held.front().data() + (at - sizeof header - header),
                           "tensors overlap or leave a gap");
      MERIDIAN_FUZZ_EXPECT(at + t.size() <= bytes.size() && std::memcmp(t.data(), bytes.data() + at, t.size()) == 0,
                           "a tensor's bytes are not the file's at its offset");
      at += t.size();
    }
    MERIDIAN_FUZZ_EXPECT(at == bytes.size(), "the tensors leave ", bytes.size() - at, " bytes of the file");
  } catch (const Error& e) {
    MERIDIAN_FUZZ_EXPECT(e.kind() == ErrorKind::Data, "a safetensors file refused as other than Data: ", e.what());
  }
}

void config_json(int seq_len, std::string_view text) {
  const auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return;
  ModelConfig config;
  try {
    config = model_config_from_hf(json, "config.json", seq_len);
  } catch (const Error& e) {
    MERIDIAN_FUZZ_EXPECT(e.kind() == ErrorKind::Data, "config.json refused as other than Data: ", e.what());
    return;
  }
  const auto problems = validate_model_config(config);
  MERIDIAN_FUZZ_EXPECT(problems.empty(), "config.json taken as an invalid shape: ", problems.front());
  const nlohmann::json written = nlohmann::json::parse(hf_config_json(config, HfDtype::F32).dump());
  const ModelConfig again = model_config_from_hf(written, "config.json", config.seq_len);
  const std::string mismatch = weights_mismatch(again, config);
  MERIDIAN_FUZZ_EXPECT(mismatch.empty() && again.seq_len == config.seq_len,
                       "config.json written out reads as another shape: ", mismatch, "\n", written.dump());
}

// A whole model directory: config.json, and the weights in model.safetensors or, where an index
// is given, in the shard it names. What imports has the layout's size, and exported (F32) and
// imported again gives the same shape and the very same values.
void directory(int seq_len, meridian::fuzz::Input& in) {
  const auto config = in.piece();
  const auto index = in.piece();
  const auto weights = in.rest();
  const meridian::fuzz::TempFile config_file("config.json", config);
  const auto dir = config_file.path().parent_path();
  const meridian::fuzz::TempFile weights_file(index.empty() ? "model.safetensors" : "model-00001.safetensors", weights);
  std::optional<meridian::fuzz::TempFile> index_file;
  if (!index.empty()) index_file.emplace("model.safetensors.index.json", index);
  HfModel model;
  try {
    model = read_hf_model(dir, seq_len);
  } catch (const Error& e) {
    MERIDIAN_FUZZ_EXPECT(e.kind() == ErrorKind::Data || e.kind() == ErrorKind::Io, "a model refused as ", e.what());
    return;
  }
  MERIDIAN_FUZZ_EXPECT(model.params.size() == ParamLayout::of(model.config).total(), "params of the wrong size");
  const auto out = dir / "exported";
  export_hf(model.config, model.params, out);
  const HfModel again = read_hf_model(out, model.config.seq_len);
  std::filesystem::remove_all(out);
  MERIDIAN_FUZZ_EXPECT(weights_mismatch(again.config, model.config).empty(), "exported, another shape");
  MERIDIAN_FUZZ_EXPECT(std::memcmp(again.params.data(), model.params.data(), model.params.size() * sizeof(float)) == 0,
                       "exported and imported again, other values");
}

}  // namespace

int meridian_fuzz_hf(const std::uint8_t* data, std::size_t size) {
  meridian::fuzz::Input in(data, size);
  const auto how = in.take<std::uint8_t>();
  if (how & 1) {
    safetensors(in.rest());
  } else {
    const auto seq = in.take<std::uint8_t>();
    const int seq_len = seq % 4 == 0 ? 0 : seq;
    if (how & 2)
      directory(seq_len, in);
    else
      config_json(seq_len, in.rest_text());
  }
  return 0;
}

MERIDIAN_FUZZ_TARGET(hf)
