#include "sites/cli/model_source.hpp"

#include <cstdio>
#include <filesystem>

#include "core/hf/hf_import.hpp"
#include "core/io/env.hpp"
#include "core/util/error.hpp"

namespace meridian::cli {

namespace {

std::optional<TokenizerFile> hf_tokenizer_of(const std::filesystem::path& dir) {
  const auto file = dir / "tokenizer.json";
  if (!std::filesystem::is_regular_file(file)) return std::nullopt;
  const auto bytes = posix_env().read_all(file);
  return TokenizerFile{"tokenizer.json", std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()), ""};
}

}  // namespace

ModelSnapshot model_at(const std::string& path, int seq_len) {
  if (is_hf_model_dir(path)) {
    HfModel hf = read_hf_model(path, seq_len);
    return {hf.config, std::move(hf.params), 0, path, hf_tokenizer_of(path)};
  }
  ModelSnapshot snap = load_model_snapshot(
      posix_env(), path, [](const std::string& why) { std::fprintf(stderr, "warning: %s\n", why.c_str()); });
  if (seq_len > 0) {
    if (seq_len > snap.shape.positions())
      throw make_error(ErrorKind::Usage, "--seq-len ", seq_len, " is longer than the model's context of ",
                       snap.shape.positions());
    snap.shape.seq_len = seq_len;
  }
  return snap;
}

}  // namespace meridian::cli
