#include "core/train/init_from.hpp"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/hf/hf_config.hpp"
#include "core/hf/hf_import.hpp"
#include "core/io/env.hpp"
#include "core/train/train_checkpoint.hpp"
#include "core/util/error.hpp"

namespace meridian {
namespace {

namespace fs = std::filesystem;

void require_same_weights(const fs::path& from, const ModelConfig& have, const ModelConfig& want) {
  const std::string mismatch = weights_mismatch(have, want);
  if (mismatch.empty()) return;
  throw make_error(ErrorKind::Config, "[model] init_from ", from.string(), " holds a model whose ", mismatch,
                   " as the job's [model] says (", describe(want),
                   "); the job's [model] must describe the same weights (`meridian import` prints them)");
}

ModelSnapshot snapshot_of(const fs::path& from) {
  return load_model_snapshot(posix_env(), from, [](const std::string& why) {
    std::fprintf(stderr, "warning: init_from: %s\n", why.c_str());
  });
}

}  // namespace

std::vector<float> load_init_from(const fs::path& from, const ModelConfig& shape) {
  if (is_hf_model_dir(from)) {
    HfModel model = read_hf_model(from, shape.seq_len);
    require_same_weights(from, model.config, shape);
    return std::move(model.params);
  }
  ModelSnapshot snap = snapshot_of(from);
  require_same_weights(from, snap.shape, shape);
  return std::move(snap.params);
}

void check_init_from(const fs::path& from, const ModelConfig& shape) {
  if (!is_hf_model_dir(from)) {
    require_same_weights(from, snapshot_of(from).shape, shape);
    return;
  }
  const fs::path file = from / "config.json";
  const std::vector<std::byte> bytes = posix_env().read_all(file);
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(reinterpret_cast<const char*>(bytes.data()),
                                   reinterpret_cast<const char*>(bytes.data()) + bytes.size());
  } catch (const nlohmann::json::exception& e) {
    throw make_error(ErrorKind::Data, file.string(), ": not valid JSON: ", e.what());
  }
  require_same_weights(from, model_config_from_hf(config, file, shape.seq_len), shape);
}

}  // namespace meridian
