#include "core/io/atomic_write.hpp"

#include "core/util/error.hpp"

namespace meridian {

void write_atomically(Env& env, const std::filesystem::path& path, const std::filesystem::path& tmp_path,
                      const std::function<void(WritableFile&)>& write) {
  try {
    auto file = env.create(tmp_path);
    write(*file);
    file->sync();
    file->close();
  } catch (const Error&) {
    // A full disk should not stay full because of our partial file; if this removal fails too,
    // whoever owns the directory cleans stray temp files later.
    try {
      if (env.exists(tmp_path)) env.remove(tmp_path);
    } catch (const Error&) {
    }
    throw;
  }
  env.rename(tmp_path, path);
}

}  // namespace meridian
