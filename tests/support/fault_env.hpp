#pragma once
// An Env for crash tests, after LevelDB's FaultInjectionTestEnv. It passes every call through to
// posix_env() inside one directory tree and keeps a model of what a power loss would leave:
//  * per file (inode): the bytes written, and the bytes as of its last sync();
//  * per name: the live directory entries, and those as of the last sync_dir() of their directory.
// crash() makes the disk equal to the durable model: unsynced tails are lost, a created file whose
// directory was not synced disappears, an unsynced rename or remove is undone. fail_at(k) makes
// mutating operation k and every later one throw, as a process that died there would do nothing
// more; together they replay a power loss at any instant of a save.
// Directories themselves are not modelled: create_dirs is durable at once.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/io/env.hpp"
#include "core/util/error.hpp"

namespace meridian::testing {

class FaultInjectionEnv final : public Env {
 public:
  // Files already under `root` count as durable.
  explicit FaultInjectionEnv(const std::filesystem::path& root) : root_(normal(root)) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root_)) {
      if (!entry.is_regular_file()) continue;
      auto inode = std::make_shared<Inode>();
      inode->live = inode->durable = posix_env().read_all(entry.path());
      live_[key(entry.path())] = inode;
    }
    durable_ = live_;
  }

  // Mutating operations (create, append, sync, close, rename, remove, sync_dir, create_dirs) are
  // numbered from 0 in the order they are attempted.
  std::int64_t op_count() const { return ops_; }
  const std::vector<std::string>& op_log() const { return log_; }
  void fail_at(std::int64_t index) { fail_at_ = index; }

  // Deliberately broken durability: the call still happens but makes nothing durable. Used to
  // show that the crash tests would catch a save that skips its syncs.
  void ignore_file_syncs(bool on) { ignore_file_syncs_ = on; }
  void ignore_dir_syncs(bool on) { ignore_dir_syncs_ = on; }

  void crash() {
    for (const auto& weak : open_) {
      if (const auto file = weak.lock()) {
        file->dead = true;
        if (!file->real) continue;
        try {
          file->real->close();  // flush now, before the disk is rewritten below
        } catch (const Error&) {
        }
        file->real.reset();
      }
    }
    open_.clear();
    std::vector<std::filesystem::path> on_disk;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root_)) {
      if (entry.is_regular_file()) on_disk.push_back(key(entry.path()));
    }
    for (const auto& path : on_disk) {
      if (!durable_.contains(path)) std::filesystem::remove(path);
    }
    for (const auto& [path, inode] : durable_) {
      auto file = posix_env().create(path);
      file->append(inode->durable);
      file->close();
      inode->live = inode->durable;
    }
    live_ = durable_;
    failing_ = false;
    fail_at_ = -1;
  }

  std::unique_ptr<WritableFile> create(const std::filesystem::path& path) override {
    const auto k = key(path);
    begin_op("create " + k.string());
    auto open = std::make_shared<OpenFile>();
    open->real = posix_env().create(k);
    auto& inode = live_[k];
    if (inode) {
      inode->live.clear();  // O_TRUNC keeps the inode; its durable bytes stay until the next sync
    } else {
      inode = std::make_shared<Inode>();
    }
    open->inode = inode;
    open_.push_back(open);
    return std::make_unique<File>(*this, std::move(open), k.string());
  }

  std::vector<std::byte> read_all(const std::filesystem::path& path) override {
    check_alive("read_all");
    return posix_env().read_all(key(path));
  }

  void rename(const std::filesystem::path& from, const std::filesystem::path& to) override {
    const auto f = key(from), t = key(to);
    begin_op("rename " + f.string() + " -> " + t.string());
    posix_env().rename(f, t);
    live_[t] = live_.at(f);
    live_.erase(f);
  }

  void remove(const std::filesystem::path& path) override {
    const auto k = key(path);
    begin_op("remove " + k.string());
    posix_env().remove(k);
    live_.erase(k);
  }

  void sync_dir(const std::filesystem::path& dir) override {
    const auto d = key(dir);
    begin_op("sync_dir " + d.string());
    posix_env().sync_dir(d);
    if (ignore_dir_syncs_) return;
    std::erase_if(durable_, [&](const auto& entry) { return entry.first.parent_path() == d; });
    for (const auto& [path, inode] : live_) {
      if (path.parent_path() == d) durable_[path] = inode;
    }
  }

  std::vector<std::string> list_dir(const std::filesystem::path& dir) override {
    check_alive("list_dir");
    return posix_env().list_dir(key(dir));
  }

  void create_dirs(const std::filesystem::path& dir) override {
    const auto d = key(dir);
    begin_op("create_dirs " + d.string());
    posix_env().create_dirs(d);
  }

  bool exists(const std::filesystem::path& path) override {
    check_alive("exists");
    return posix_env().exists(key(path));
  }

 private:
  struct Inode {
    std::vector<std::byte> live;
    std::vector<std::byte> durable;
  };
  struct OpenFile {
    std::unique_ptr<WritableFile> real;  // null once closed or crashed
    std::shared_ptr<Inode> inode;
    bool dead = false;  // opened before a crash(): the process that owned it is gone
  };

  class File final : public WritableFile {
   public:
    File(FaultInjectionEnv& env, std::shared_ptr<OpenFile> open, std::string name)
        : env_(env), open_(std::move(open)), name_(std::move(name)) {}

    void append(std::span<const std::byte> data) override {
      usable("append " + name_ + " (" + std::to_string(data.size()) + " bytes)");
      open_->real->append(data);
      open_->inode->live.insert(open_->inode->live.end(), data.begin(), data.end());
    }
    void sync() override {
      usable("sync " + name_);
      open_->real->sync();
      if (!env_.ignore_file_syncs_) open_->inode->durable = open_->inode->live;
    }
    void close() override {
      usable("close " + name_);
      open_->real->close();
      open_->real.reset();
    }

   private:
    void usable(const std::string& op) {
      env_.begin_op(op);
      if (open_->dead) throw make_error(ErrorKind::Io, op, ": file was opened before a crash");
      MERIDIAN_CHECK(open_->real, op, " after close");
    }

    FaultInjectionEnv& env_;
    std::shared_ptr<OpenFile> open_;
    std::string name_;
  };

  // Absolute and normalised, so that one file has one key.
  static std::filesystem::path normal(const std::filesystem::path& path) {
    auto k = std::filesystem::absolute(path).lexically_normal();
    if (!k.has_filename()) k = k.parent_path();
    return k;
  }

  // The tree outside root_ is not modelled, so a test must not touch it through this Env.
  std::filesystem::path key(const std::filesystem::path& path) const {
    auto k = normal(path);
    const auto rel = k.lexically_relative(root_);
    MERIDIAN_CHECK(!rel.empty() && *rel.begin() != "..", k.string(), " is outside ", root_.string());
    return k;
  }

  void begin_op(const std::string& what) {
    const std::int64_t index = ops_++;
    log_.push_back(std::to_string(index) + ": " + what);
    if (failing_ || (fail_at_ >= 0 && index >= fail_at_)) {
      failing_ = true;
      throw make_error(ErrorKind::Io, "injected failure at operation ", index, " (", what, ")");
    }
  }

  void check_alive(const char* what) const {
    if (failing_) throw make_error(ErrorKind::Io, "injected failure: ", what, " after the process died");
  }

  std::filesystem::path root_;
  std::map<std::filesystem::path, std::shared_ptr<Inode>> live_;
  std::map<std::filesystem::path, std::shared_ptr<Inode>> durable_;
  std::vector<std::weak_ptr<OpenFile>> open_;
  std::vector<std::string> log_;
  std::int64_t ops_ = 0;
  std::int64_t fail_at_ = -1;
  bool failing_ = false;
  bool ignore_file_syncs_ = false;
  bool ignore_dir_syncs_ = false;
};

}  // namespace meridian::testing
