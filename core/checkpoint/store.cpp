#include "core/checkpoint/store.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>

#include "core/io/atomic_write.hpp"
#include "core/io/env.hpp"
#include "core/util/error.hpp"

namespace meridian {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kPrefix = "ckpt-";
constexpr std::string_view kSuffix = ".mrdn";
constexpr std::string_view kTmpSuffix = ".tmp";
constexpr std::size_t kStepDigits = 10;
constexpr std::int64_t kStepLimit = 10'000'000'000;  // 10 digits

std::string file_name(std::int64_t step) {
  char digits[kStepDigits + 1];
  std::snprintf(digits, sizeof digits, "%010lld", static_cast<long long>(step));
  return std::string(kPrefix) + digits + std::string(kSuffix);
}

// Exactly ckpt-DDDDDDDDDD.mrdn; anything else in the directory is not ours to judge.
std::optional<std::int64_t> parse_step(std::string_view name) {
  if (name.size() != kPrefix.size() + kStepDigits + kSuffix.size()) return std::nullopt;
  if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) return std::nullopt;
  std::int64_t step = 0;
  for (const char c : name.substr(kPrefix.size(), kStepDigits)) {
    if (c < '0' || c > '9') return std::nullopt;
    step = step * 10 + (c - '0');
  }
  return step;
}

constexpr std::string_view kPartInfix = ".part-";
constexpr std::size_t kOffsetDigits = 12;

// ckpt-DDDDDDDDDD.part-OOOOOOOOOOOO.mrdn: the step of a part file.
std::optional<std::int64_t> parse_part_step(std::string_view name) {
  const std::size_t main_stem = kPrefix.size() + kStepDigits;
  if (name.size() != main_stem + kPartInfix.size() + kOffsetDigits + kSuffix.size()) return std::nullopt;
  if (name.substr(main_stem, kPartInfix.size()) != kPartInfix) return std::nullopt;
  const std::string_view offset = name.substr(main_stem + kPartInfix.size(), kOffsetDigits);
  if (offset.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  return parse_step(std::string(name.substr(0, main_stem)) + std::string(kSuffix));
}

bool is_leftover_tmp(std::string_view name) {
  if (!name.ends_with(kTmpSuffix)) return false;
  const std::string_view stem = name.substr(0, name.size() - kTmpSuffix.size());
  return parse_step(stem).has_value() || parse_part_step(stem).has_value();
}

// A temp file that no writer will finish once `just_saved` is saved: a checkpoint's own (only
// the leader writes those, and its write is done), or a part's of an older step. A part of this
// step or a later one may be in a member's hands right now: the members write the parts of the
// next save, which can be of the same step (the last periodic checkpoint, then the final one).
bool is_abandoned_tmp(std::string_view name, std::int64_t just_saved) {
  if (!is_leftover_tmp(name)) return false;
  const auto part_step = parse_part_step(name.substr(0, name.size() - kTmpSuffix.size()));
  return !part_step || *part_step < just_saved;
}

}  // namespace

CheckpointStore::CheckpointStore(Env& env, fs::path dir, int keep_last)
    : env_(env), dir_(std::move(dir)), keep_last_(keep_last) {
  if (keep_last < 1) throw make_error(ErrorKind::Config, "checkpoint keep_last must be >= 1, got ", keep_last);
}

fs::path CheckpointStore::path_for(std::int64_t step) const {
  if (step < 0 || step >= kStepLimit) {
    throw make_error(ErrorKind::Checkpoint, "checkpoint step ", step, " is outside [0, ", kStepLimit, ")");
  }
  return dir_ / file_name(step);
}

fs::path CheckpointStore::save(std::int64_t step, const Checkpoint& checkpoint) {
  const fs::path final_path = write(path_for(step), checkpoint);
  prune(step);
  return final_path;
}

fs::path CheckpointStore::save_part(std::int64_t step, std::size_t offset, const Checkpoint& part) {
  return write(part_path(path_for(step), offset), part);
}

fs::path CheckpointStore::write(const fs::path& final_path, const Checkpoint& checkpoint) {
  fs::path tmp_path = final_path;
  tmp_path += kTmpSuffix;
  env_.create_dirs(dir_);
  // Until the rename, readers cannot see the new file; after sync_dir, the rename is durable. If
  // removing a failed temp file fails too, the next save's prune retries it.
  write_atomically(env_, final_path, tmp_path, [&](WritableFile& file) { write_checkpoint(checkpoint, file); });
  env_.sync_dir(dir_);
  return final_path;
}

void CheckpointStore::prune(std::int64_t just_saved) {
  std::vector<std::int64_t> present = steps();
  std::vector<fs::path> doomed;
  // The file just saved always stays, even when older than the rest (a rollback), and the
  // newest others fill the remaining places.
  std::sort(present.rbegin(), present.rend());
  int kept = 1;
  for (const std::int64_t step : present) {
    if (step == just_saved) continue;
    if (kept < keep_last_) {
      ++kept;
    } else {
      doomed.push_back(path_for(step));
    }
  }
  // Parts go with their checkpoint, and so do those of an older step whose checkpoint is absent
  // (its leader died before writing it).
  const auto has = [](const auto& list, const auto& x) { return std::find(list.begin(), list.end(), x) != list.end(); };
  for (const auto& name : env_.list_dir(dir_)) {
    if (is_abandoned_tmp(name, just_saved)) doomed.push_back(dir_ / name);
    const auto part_step = parse_part_step(name);
    if (!part_step || *part_step == just_saved) continue;
    if (has(doomed, path_for(*part_step)) || (!has(present, *part_step) && *part_step < just_saved))
      doomed.push_back(dir_ / name);
  }
  if (doomed.empty()) return;
  for (const auto& path : doomed) env_.remove(path);
  env_.sync_dir(dir_);
}

std::vector<std::int64_t> CheckpointStore::steps() const {
  std::vector<std::int64_t> out;
  if (!env_.exists(dir_)) return out;
  for (const auto& name : env_.list_dir(dir_)) {
    if (const auto step = parse_step(name)) out.push_back(*step);
  }
  std::sort(out.begin(), out.end());
  return out;
}

template <class Read>
auto CheckpointStore::newest(const std::function<void(const std::string&)>& warn, Read read) const
    -> std::optional<decltype(read(std::int64_t{}, fs::path()))> {
  const auto report = [&](const std::string& message) {
    if (warn) warn(message);
  };
  if (!env_.exists(dir_)) return std::nullopt;
  for (const auto& name : env_.list_dir(dir_)) {
    if (is_leftover_tmp(name)) {
      report("ignoring " + (dir_ / name).string() + ": unfinished checkpoint (a save that did not complete)");
    }
  }
  const std::vector<std::int64_t> present = steps();
  for (auto it = present.rbegin(); it != present.rend(); ++it) {
    const fs::path path = path_for(*it);
    try {
      return read(*it, path);
    } catch (const Error& e) {
      // Decode errors already name the file; Io errors name the path too.
      report(std::string("skipping checkpoint: ") + e.what());
    }
  }
  return std::nullopt;
}

std::optional<CheckpointStore::Loaded> CheckpointStore::load_latest(
    const std::function<void(const std::string&)>& warn) const {
  return newest(warn, [&](std::int64_t step, const fs::path& path) {
    return Loaded{step, path, read_checkpoint(env_, path)};
  });
}

std::optional<CheckpointStore::LoadedHead> CheckpointStore::load_latest_head(
    const std::function<void(const std::string&)>& warn) const {
  return newest(warn, [&](std::int64_t step, const fs::path& path) {
    return LoadedHead{step, path, read_checkpoint_head(env_, path)};
  });
}

fs::path part_path(const fs::path& path, std::size_t offset) {
  char digits[kOffsetDigits + 1];
  std::snprintf(digits, sizeof digits, "%012llu", static_cast<unsigned long long>(offset));
  return path.parent_path() / (path.stem().string() + std::string(kPartInfix) + digits + std::string(kSuffix));
}

}  // namespace meridian
