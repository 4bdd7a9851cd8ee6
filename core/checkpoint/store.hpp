#pragma once
// A directory of checkpoints named ckpt-<step, 10 digits>.mrdn. A save is atomic (a crash at any
// instant leaves the previous checkpoint usable) and loading takes the newest file that verifies.
//
// A checkpoint may be written in parts (a site whose replicas shard AdamW's moments, [checkpoint]
// per_replica): each replica saves its part of the moments with save_part, as
// ckpt-<step>.part-<offset, 12 digits>.mrdn ("adamw.m", "adamw.v", "adamw.shard", "train.step"),
// and once every part is on disk the leader saves the rest with save, its record "adamw.parts"
// (uint64: the parts' count, then each part's offset and element count) the manifest. A part may
// also carry a slice of a state the replicas hold in parts of their own (sliced_records.hpp: a
// sharded outer state's), which every part then carries. read_checkpoint puts the parts back into
// the whole model's moments and joins the slices, so every reader sees the file an unsharded save
// writes; a part missing, damaged, or of another step or range makes the checkpoint unusable
// (load_latest then tries the next older one).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint.hpp"
#include "core/checkpoint/checkpoint_parts.hpp"

namespace meridian {

class Env;

class CheckpointStore {
 public:
  // keep_last >= 1 (Error(Config) otherwise). The directory is created on the first save.
  CheckpointStore(Env& env, std::filesystem::path dir, int keep_last);

  // Writes "<name>.tmp", syncs and closes it, renames it to the final name and syncs the
  // directory; only then removes checkpoints beyond keep_last (with their parts) and the .tmp
  // files no writer will finish: earlier saves' own, and parts of older steps (a part of this step
  // or a later one may be another replica's write in progress). Returns the final path. step must
  // be in [0, 10^10).
  std::filesystem::path save(std::int64_t step, const Checkpoint& checkpoint);
  // A part (above): written atomically, nothing pruned.
  std::filesystem::path save_part(std::int64_t step, std::size_t offset, const Checkpoint& part);

  struct Loaded {
    std::int64_t step;
    std::filesystem::path path;
    Checkpoint checkpoint;
  };
  // The newest checkpoint that verifies. Every file skipped on the way (corrupt, truncated,
  // unreadable, a leftover .tmp) is reported through `warn`, naming the file and the reason.
  // nullopt when none is usable or the directory does not exist.
  std::optional<Loaded> load_latest(const std::function<void(const std::string&)>& warn = {}) const;
  // The same, leaving a checkpoint's parts on disk once checked (checkpoint_parts.hpp).
  struct LoadedHead {
    std::int64_t step;
    std::filesystem::path path;
    CheckpointHead checkpoint;
  };
  std::optional<LoadedHead> load_latest_head(const std::function<void(const std::string&)>& warn = {}) const;

  // Steps of the checkpoint files present (not verified), ascending.
  std::vector<std::int64_t> steps() const;

  std::filesystem::path path_for(std::int64_t step) const;

 private:
  // The newest checkpoint `read` takes without an Error, the others reported through `warn`.
  template <class Read>
  auto newest(const std::function<void(const std::string&)>& warn, Read read) const
      -> std::optional<decltype(read(std::int64_t{}, std::filesystem::path()))>;
  void prune(std::int64_t just_saved);
  std::filesystem::path write(const std::filesystem::path& final_path, const Checkpoint& checkpoint);

  Env& env_;
  std::filesystem::path dir_;
  int keep_last_;
};

// The checkpoint file at `path`, with the parts it names (beside it) put back into whole
// "adamw.m" and "adamw.v" records and their slices joined. Error(Checkpoint) naming the file and
// the part otherwise.
Checkpoint read_checkpoint(Env& env, const std::filesystem::path& path);

// ckpt-<step>.part-<offset>.mrdn beside the checkpoint file `path`.
std::filesystem::path part_path(const std::filesystem::path& path, std::size_t offset);

}  // namespace meridian
