#pragma once
// What a job's `[data] path` (and each source's, and val_path) names: one file, a directory (its
// files), or a glob of shards as llm.c takes them ("fineweb_train_*.bin").
#include <filesystem>
#include <vector>

namespace meridian {

// The files, in name order (byte order, whatever the locale), so that every replica and every run
// reads the same sequence. Error(Data) naming the path when a glob or a directory holds no file,
// and when a directory holds validation shards beside the training ones (val_*, *_val_*: they
// would be trained on; name the training ones with a glob).
std::vector<std::filesystem::path> expand_data_path(const std::filesystem::path& path);

}  // namespace meridian
