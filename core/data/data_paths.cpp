#include "core/data/data_paths.hpp"

#include <glob.h>

#include <algorithm>
#include <string>

#include "core/util/error.hpp"

namespace meridian {

namespace fs = std::filesystem;

namespace {

bool is_glob(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

std::vector<fs::path> glob_files(const fs::path& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g);
  std::vector<fs::path> out;
  if (rc == 0)
    for (std::size_t i = 0; i < g.gl_pathc; ++i)
      if (std::error_code ec; fs::is_regular_file(g.gl_pathv[i], ec)) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (rc != 0 && rc != GLOB_NOMATCH)
    throw make_error(ErrorKind::Data, "data path ", pattern, ": the glob could not be read (glob returned ", rc, ")");
  if (out.empty()) throw make_error(ErrorKind::Data, "data path ", pattern, " matches no file");
  return out;
}

bool is_validation_name(const std::string& name) {
  return name.starts_with("val_") || name.find("_val_") != std::string::npos;
}

std::vector<fs::path> directory_files(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(".") || !entry.is_regular_file(ec)) continue;
    if (is_validation_name(name))
      throw make_error(ErrorKind::Data, "data path ", dir, " holds the validation shard ", name,
                       ", which would be trained on: name the training shards with a glob (",
                       (dir / "train_*.bin").string(), ") and these with val_path");
    out.push_back(entry.path());
  }
  if (ec) throw make_error(ErrorKind::Data, "data path ", dir, " cannot be listed: ", ec.message());
  if (out.empty()) throw make_error(ErrorKind::Data, "data path ", dir, " is a directory without files");
  return out;
}

}  // namespace

std::vector<fs::path> expand_data_path(const fs::path& path) {
  std::error_code ec;
  std::vector<fs::path> files;
  if (is_glob(path.string()) && !fs::exists(path, ec)) files = glob_files(path);
  else if (fs::is_directory(path, ec)) files = directory_files(path);
  else return {path};  // a file: TokenShard::open says what is wrong with it
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) { return a.string() < b.string(); });
  return files;
}

}  // namespace meridian
