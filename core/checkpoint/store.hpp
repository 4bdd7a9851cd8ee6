#pragma once
// A directory of checkpoints named ckpt-<step, 10 digits>.mrdn. A save is atomic (a crash at any
// instant leaves the previous checkpoint usable) and loading takes the newest file that verifies.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint.hpp"

namespace meridian {

class Env;

class CheckpointStore {
 public:
  // keep_last >= 1 (Error(Config) otherwise). The directory is created on the first save.
  CheckpointStore(Env& env, std::filesystem::path dir, int keep_last);

  // Writes "<name>.tmp", syncs and closes it, renames it to the final name and syncs the
  // directory; only then removes checkpoints beyond keep_last and leftover .tmp files. Returns
  // the final path. step must be in [0, 10^10).
  std::filesystem::path save(std::int64_t step, const Checkpoint& checkpoint);

  struct Loaded {
    std::int64_t step;
    std::filesystem::path path;
    Checkpoint checkpoint;
  };
  // The newest checkpoint that verifies. Every file skipped on the way (corrupt, truncated,
  // unreadable, a leftover .tmp) is reported through `warn`, naming the file and the reason.
  // nullopt when none is usable or the directory does not exist.
  std::optional<Loaded> load_latest(const std::function<void(const std::string&)>& warn = {}) const;

  // Steps of the checkpoint files present (not verified), ascending.
  std::vector<std::int64_t> steps() const;

  std::filesystem::path path_for(std::int64_t step) const;

 private:
  void prune(std::int64_t just_saved);

  Env& env_;
  std::filesystem::path dir_;
  int keep_last_;
};

}  // namespace meridian
