#include "core/checkpoint/store.hpp"

#include <algorithm>
#include <cstdio>

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

bool is_leftover_tmp(std::string_view name) {
  return name.ends_with(kTmpSuffix) && parse_step(name.substr(0, name.size() - kTmpSuffix.size())).has_value();
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
  const fs::path final_path = path_for(step);
  fs::path tmp_path = final_path;
  tmp_path += kTmpSuffix;
  env_.create_dirs(dir_);
  // Until the rename, readers cannot see the new file; after sync_dir, the rename is durable. If
  // removing a failed temp file fails too, the next save's prune retries it.
  write_atomically(env_, final_path, tmp_path, [&](WritableFile& file) { write_checkpoint(checkpoint, file); });
  env_.sync_dir(dir_);
  prune(step);
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
  for (const auto& name : env_.list_dir(dir_)) {
    if (is_leftover_tmp(name)) doomed.push_back(dir_ / name);
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

std::optional<CheckpointStore::Loaded> CheckpointStore::load_latest(
    const std::function<void(const std::string&)>& warn) const {
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
      auto checkpoint = decode_checkpoint(env_.read_all(path), path.string());
      return Loaded{*it, path, std::move(checkpoint)};
    } catch (const Error& e) {
      // Decode errors already name the file; Io errors name the path too.
      report(std::string("skipping checkpoint: ") + e.what());
    }
  }
  return std::nullopt;
}

}  // namespace meridian
