#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/hf/hf_export.hpp"
#include "core/hf/safetensors.hpp"
#include "core/model/param_layout.hpp"
#include "core/util/error.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const ModelConfig kTiny{2, 2, 8, 6, 11};

// Each parameter holds its own index, so a tensor read from the wrong place cannot match.
std::vector<float> indexed_params(const ModelConfig& c) {
  std::vector<float> p(ParamLayout::of(c).total());
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<float>(i);
  return p;
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spill(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::uint64_t header_length(const std::string& file) {
  std::uint64_t n = 0;
  std::memcpy(&n, file.data(), sizeof n);
  return n;
}

// A safetensors file with the given header JSON (unpadded) and data buffer.
std::string safetensors_file(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const std::uint64_t n = header.size();
  std::memcpy(out.data(), &n, sizeof n);
  return out + header + data;
}

// The Error that reading `path` throws; fails the test if it throws none.
Error read_error(const fs::path& path) {
  try {
    read_safetensors(path);
  } catch (const Error& e) {
    return e;
  }
  FAIL("no error for a malformed file");
  return Error(ErrorKind::Data, "");
}

// The message of the Data error that reading `bytes` as a safetensors file gives.
std::string read_error(const TempDir& dir, const std::string& bytes) {
  const fs::path path = dir / "bad.safetensors";
  spill(path, bytes);
  const Error e = read_error(path);
  CHECK(e.kind() == ErrorKind::Data);
  return e.what();
}

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("export round trip: every layout tensor, with its shape and exact values") {
  TempDir dir("export");
  const auto params = indexed_params(kTiny);
  const fs::path out = dir / "nested/hf";  // export creates missing directories
  export_hf(kTiny, params, out);

  const auto tensors = read_safetensors(out / "model.safetensors");
  const ParamLayout layout = ParamLayout::of(kTiny);
  CHECK(tensors.size() == layout.views().size());
  for (const auto& v : layout.views()) {
    const auto it = tensors.find("transformer." + v.name);
    REQUIRE_MESSAGE(it != tensors.end(), v.name);
    CHECK(it->second.dtype == "F32");
    CHECK_MESSAGE(it->second.shape == v.shape, v.name);
    const auto want = layout.slice(std::span<const float>(params), v);
    CHECK_MESSAGE(std::equal(want.begin(), want.end(), it->second.data.begin(), it->second.data.end()), v.name);
  }
  CHECK(tensors.at("transformer.h.1.attn.c_attn.weight").shape == std::vector<std::int64_t>{8, 24});
  CHECK(tensors.at("transformer.h.0.mlp.c_proj.weight").shape == std::vector<std::int64_t>{32, 8});
  CHECK(tensors.count("lm_head.weight") == 0);  // tied to wte
  CHECK(tensors.count("transformer.h.0.attn.bias") == 0);  // a buffer transformers rebuilds

  for (const auto& entry : fs::directory_iterator(out)) {
    CHECK_MESSAGE(entry.path().extension() != ".tmp", entry.path());
  }
}

TEST_CASE("export file layout: aligned header, metadata, tensors in layout order") {
  TempDir dir("export");
  const auto params = indexed_params(kTiny);
  export_hf(kTiny, params, dir.path());

  const std::string file = slurp(dir / "model.safetensors");
  const std::uint64_t n = header_length(file);
  CHECK(n % 8 == 0);  // the data buffer starts 8-byte aligned
  CHECK(file.size() == 8 + n + params.size() * sizeof(float));
  CHECK(std::memcmp(file.data() + 8 + n, params.data(), params.size() * sizeof(float)) == 0);

  const auto header = nlohmann::ordered_json::parse(file.substr(8, n));
  CHECK(header.at("__metadata__").at("format") == "pt");
  const ParamLayout layout = ParamLayout::of(kTiny);
  REQUIRE(header.size() == layout.views().size() + 1);
  std::uint64_t offset = 0;
  auto item = std::next(header.begin());  // after __metadata__
  for (const auto& v : layout.views()) {
    CHECK(item.key() == "transformer." + v.name);
    CHECK(item.value().at("data_offsets") == nlohmann::json::array({offset, offset + v.numel * 4}));
    offset += v.numel * 4;
    ++item;
  }
}

TEST_CASE("export config.json is a GPT2Config for GPT2LMHeadModel") {
  TempDir dir("export");
  export_hf(kTiny, indexed_params(kTiny), dir.path());
  const auto config = nlohmann::json::parse(slurp(dir / "config.json"));
  CHECK(config.at("model_type") == "gpt2");
  CHECK(config.at("architectures") == nlohmann::json::array({"GPT2LMHeadModel"}));
  CHECK(config.at("vocab_size") == 11);
  CHECK(config.at("n_positions") == 6);
  CHECK(config.at("n_ctx") == 6);
  CHECK(config.at("n_embd") == 8);
  CHECK(config.at("n_layer") == 2);
  CHECK(config.at("n_head") == 2);
  CHECK(config.at("n_inner").is_null());
  CHECK(config.at("activation_function") == "gelu_new");
  CHECK(config.at("layer_norm_epsilon").get<double>() == 1e-5);
  for (const char* key : {"resid_pdrop", "embd_pdrop", "attn_pdrop"}) CHECK(config.at(key).get<double>() == 0.0);
  CHECK(config.at("initializer_range").get<double>() == 0.02);
  CHECK(config.at("bos_token_id") == 10);
  CHECK(config.at("eos_token_id") == 10);
  CHECK(config.at("tie_word_embeddings") == true);
  CHECK(config.at("torch_dtype") == "float32");
}

TEST_CASE("export overwrites an earlier export in place") {
  TempDir dir("export");
  export_hf(kTiny, indexed_params(kTiny), dir.path());
  const ModelConfig other{1, 1, 4, 3, 5};
  auto params = indexed_params(other);
  for (auto& p : params) p = -p;
  export_hf(other, params, dir.path());
  const auto tensors = read_safetensors(dir / "model.safetensors");
  CHECK(tensors.size() == ParamLayout::of(other).views().size());
  CHECK(tensors.at("transformer.ln_f.bias").data.back() == params.back());
  CHECK(nlohmann::json::parse(slurp(dir / "config.json")).at("vocab_size") == 5);
}

TEST_CASE("export into a path that cannot be a directory is an Io error") {
  TempDir dir("export");
  spill(dir / "file", "x");
  try {
    export_hf(kTiny, indexed_params(kTiny), dir / "file/hf");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Io);
  }
}

TEST_CASE("read_safetensors: a missing file is an Io error") {
  TempDir dir("export");
  CHECK(read_error(dir / "absent.safetensors").kind() == ErrorKind::Io);
}

TEST_CASE("read_safetensors: every truncation of an export is an error, not a crash") {
  TempDir dir("export");
  export_hf(kTiny, indexed_params(kTiny), dir.path());
  const std::string file = slurp(dir / "model.safetensors");
  for (std::size_t size = 0; size < file.size(); ++size) {
    CAPTURE(size);
    read_error(dir, file.substr(0, size));
  }
}

TEST_CASE("read_safetensors: malformed files give clear Data errors") {
  TempDir dir("export");
  const std::string four_floats(16, '\0');
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  spill(dir / "ok", safetensors_file(ok, four_floats));
  REQUIRE(read_safetensors(dir / "ok").at("a").shape == std::vector<std::int64_t>{2, 2});

  CHECK(contains(read_error(dir, "abc"), "too short"));
  CHECK(contains(read_error(dir, std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8) + "{}"), "only 2 bytes follow"));
  std::string too_long = safetensors_file(ok, four_floats);
  too_long[0] = static_cast<char>(ok.size() + 17);
  CHECK(contains(read_error(dir, too_long), "header length"));
  CHECK(contains(read_error(dir, safetensors_file("{\"a\":", four_floats)), "not valid JSON"));
  CHECK(contains(read_error(dir, safetensors_file("[1,2]", "")), "not a JSON object"));

  const auto tensor = [&](const std::string& fields, const std::string& data) {
    return read_error(dir, safetensors_file(R"({"a":{)" + fields + "}}", data));
  };
  CHECK(contains(tensor(R"("dtype":"F32","shape":[2,2],"data_offsets":[0,32])", four_floats), "outside"));
  CHECK(contains(tensor(R"("dtype":"F32","shape":[2,2],"data_offsets":[16,0])", four_floats), "outside"));
  CHECK(contains(tensor(R"("dtype":"F32","shape":[2,3],"data_offsets":[0,16])", four_floats), "needs 24"));
  CHECK(contains(tensor(R"("dtype":"F32","shape":[2,-2],"data_offsets":[0,16])", four_floats), "not a size"));
  CHECK(contains(tensor(R"("dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16])", four_floats),
                 "larger than the file"));
  CHECK(contains(tensor(R"("dtype":"F32","shape":[2,2],"data_offsets":[0])", four_floats), "[begin, end]"));
  CHECK(contains(tensor(R"("dtype":"Q4","shape":[2,2],"data_offsets":[0,16])", four_floats), "not a safetensors dtype"));
  CHECK(contains(tensor(R"("dtype":"BF16","shape":[2,2],"data_offsets":[0,16])", four_floats), "of BF16 needs 8"));
  CHECK(contains(tensor(R"("shape":[2,2],"data_offsets":[0,16])", four_floats), "tensor 'a'"));
  CHECK(contains(tensor(R"("dtype":"F32","shape":[2],"data_offsets":[8,16])", four_floats), "contiguous"));
  CHECK(contains(tensor(R"("dtype":"F32","shape":[2],"data_offsets":[0,8])", four_floats), "data buffer holds 16"));
}
