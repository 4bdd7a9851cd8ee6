#pragma once
// A reader (or a crash) never sees a half-written file under its final name: the bytes go to
// `tmp_path`, which is synced and closed before it replaces `path`. The caller syncs the
// directory when the rename itself must survive a power loss.
#include <filesystem>
#include <functional>

#include "core/io/env.hpp"

namespace meridian {

void write_atomically(Env& env, const std::filesystem::path& path, const std::filesystem::path& tmp_path,
                      const std::function<void(WritableFile&)>& write);

}  // namespace meridian
