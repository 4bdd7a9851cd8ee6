#pragma once
// The narrow file-system interface that everything durable goes through. It exists so that crash
// safety can be proven: a test Env (tests/support/fault_env.hpp) forgets whatever was not made
// durable by sync()/sync_dir() and replays a power loss at any operation.
#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace meridian {

class WritableFile {
 public:
  virtual ~WritableFile();
  virtual void append(std::span<const std::byte> data) = 0;
  // Makes everything appended so far durable (fsync). Until then a power loss may drop it.
  virtual void sync() = 0;
  virtual void close() = 0;
};

class Env {
 public:
  virtual ~Env();
  // Creates or truncates. The new name itself is durable only after sync_dir of its directory.
  virtual std::unique_ptr<WritableFile> create(const std::filesystem::path& path) = 0;
  virtual std::vector<std::byte> read_all(const std::filesystem::path& path) = 0;
  // Atomically replaces `to`; durable only after sync_dir.
  virtual void rename(const std::filesystem::path& from, const std::filesystem::path& to) = 0;
  virtual void remove(const std::filesystem::path& path) = 0;
  // Makes creations, renames and removals of entries in `dir` durable.
  virtual void sync_dir(const std::filesystem::path& dir) = 0;
  // Names (not paths) of the entries of `dir`, sorted.
  virtual std::vector<std::string> list_dir(const std::filesystem::path& dir) = 0;
  // Like mkdir -p; directories it creates are durable when it returns.
  virtual void create_dirs(const std::filesystem::path& dir) = 0;
  virtual bool exists(const std::filesystem::path& path) = 0;
};

// The real file system. Every failure throws Error(ErrorKind::Io) naming the path and the reason.
Env& posix_env();

}  // namespace meridian
