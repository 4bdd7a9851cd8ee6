#pragma once
// A checkpoint written in parts (store.hpp), read without ever holding it whole: the leader's file
// first, every part it names checked one at a time (read_checkpoint_head), then the values of any
// range of the moments, or of the parts' slices (sliced_records.hpp), from the part files that hold
// them. How a sharded site's replicas resume: each reads the records of its own part once its
// group has formed and the part is known, so none holds the whole model's moments or outer state.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint.hpp"
#include "core/checkpoint/sliced_records.hpp"

namespace meridian {

class Env;
struct CheckpointHead;

class CheckpointParts {
 public:
  std::int64_t step() const { return step_; }
  const std::filesystem::path& path() const { return path_; }
  std::size_t total() const { return total_; }
  // Whether the parts carry slices of a state of their own (a sharded outer state's).
  bool has_slices() const { return !slices_.empty(); }

  // "adamw.m" and "adamw.v" of the elements [offset, offset + count), "adamw.shard" naming them and
  // the leader's "adamw.t": the records decode_optimizer_state takes. Reads only the part files that overlap.
  Checkpoint moments(std::size_t offset, std::size_t count) const;
  // The slices' records with the values of [offset, offset + count) alone, and those not per value
  // as every slice has them. InvariantError without slices.
  Checkpoint slice(std::size_t offset, std::size_t count) const;
  // Error(Checkpoint) from both, naming the file, when a part is not what it was when checked.
  // The whole checkpoint, as read_checkpoint gives it.
  Checkpoint read_whole() const;

 private:
  friend CheckpointHead read_checkpoint_head(Env& env, const std::filesystem::path& path);
  struct Part {
    std::size_t offset = 0, count = 0;              // of the moments
    std::size_t slice_offset = 0, slice_count = 0;  // of the slice, when the parts carry one
  };
  Checkpoint read_part(std::size_t index) const;

  Env* env_ = nullptr;
  std::filesystem::path path_;
  std::int64_t step_ = 0;
  std::optional<std::int64_t> adamw_steps_;  // "adamw.t" of the leader's file
  std::size_t total_ = 0;
  std::vector<Part> parts_;
  std::string slices_, shared_;  // the slices' lists of records: per value, and not
  SliceKinds kinds_;             // ... as read
};

struct CheckpointHead {
  Checkpoint head;  // the whole checkpoint when it has no parts
  std::optional<CheckpointParts> parts;
};

// The checkpoint file at `path` when it has no parts; else its own records (at ZeRO stage 3 with
// the weights put together from the parts) and its parts, each read and checked as read_checkpoint
// checks it, then let go. Error(Checkpoint) naming the file and the part otherwise.
CheckpointHead read_checkpoint_head(Env& env, const std::filesystem::path& path);

}  // namespace meridian
