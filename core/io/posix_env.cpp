#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

#include "core/io/env.hpp"
#include "core/io/io_error.hpp"
#include "core/util/error.hpp"

namespace meridian {

WritableFile::~WritableFile() = default;
Env::~Env() = default;

namespace {

namespace fs = std::filesystem;

int open_or_throw(const fs::path& path, int flags, const char* op, mode_t mode = 0) {
  int fd;
  do fd = ::open(path.c_str(), flags | O_CLOEXEC, mode); while (fd < 0 && errno == EINTR);
  if (fd < 0) throw_io(op, path);
  return fd;
}

void fsync_or_throw(int fd, const fs::path& path) {
  if (::fsync(fd) != 0) throw_io("fsync", path);
}

// Closes a descriptor that was only read or already synced; a failure here cannot lose data.
void close_quietly(int fd) { ::close(fd); }

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(fs::path path, int fd) : path_(std::move(path)), fd_(fd) { buffer_.reserve(kBufferSize); }

  ~PosixWritableFile() override {
    if (fd_ < 0) return;
    try {
      flush();
    } catch (const Error&) {
      // A destructor runs on error paths where the caller has already given up on this file.
    }
    close_quietly(fd_);
  }

  void append(std::span<const std::byte> data) override {
    MERIDIAN_CHECK(fd_ >= 0, "append to closed file ", path_.string());
    // Small appends (record headers) are gathered; large ones (tensors) go straight to the kernel.
    if (buffer_.size() + data.size() > kBufferSize) flush();
    if (data.size() >= kBufferSize) {
      write_all(data);
    } else {
      buffer_.insert(buffer_.end(), data.begin(), data.end());
    }
  }

  void sync() override {
    MERIDIAN_CHECK(fd_ >= 0, "sync of closed file ", path_.string());
    flush();
    fsync_or_throw(fd_, path_);
  }

  void close() override {
    MERIDIAN_CHECK(fd_ >= 0, "close of closed file ", path_.string());
    flush();
    const int fd = fd_;
    fd_ = -1;
    // close() can report a deferred write error (NFS, quota); that must not pass silently.
    if (::close(fd) != 0 && errno != EINTR) throw_io("close", path_);
  }

 private:
  static constexpr std::size_t kBufferSize = 1 << 16;

  void flush() {
    if (buffer_.empty()) return;
    write_all(buffer_);
    buffer_.clear();
  }

  void write_all(std::span<const std::byte> data) {
    while (!data.empty()) {
      const ssize_t n = ::write(fd_, data.data(), std::min<std::size_t>(data.size(), 1 << 30));
      if (n < 0) {
        if (errno == EINTR) continue;
        throw_io("write", path_);
      }
      data = data.subspan(static_cast<std::size_t>(n));
    }
  }

  fs::path path_;
  int fd_;
  std::vector<std::byte> buffer_;
};

class PosixEnv final : public Env {
 public:
  std::unique_ptr<WritableFile> create(const fs::path& path) override {
    const int fd = open_or_throw(path, O_WRONLY | O_CREAT | O_TRUNC, "create", 0644);
    return std::make_unique<PosixWritableFile>(path, fd);
  }

  std::vector<std::byte> read_all(const fs::path& path) override {
    const int fd = open_or_throw(path, O_RDONLY, "open");
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      close_quietly(fd);
      throw_io("stat", path, err);
    }
    std::vector<std::byte> data(static_cast<std::size_t>(st.st_size));
    std::size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = ::read(fd, data.data() + done, data.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int err = errno;
        close_quietly(fd);
        throw_io("read", path, err);
      }
      if (n == 0) break;  // shrank under us: return what is there; the checksums will judge it
      done += static_cast<std::size_t>(n);
    }
    close_quietly(fd);
    data.resize(done);
    return data;
  }

  void rename(const fs::path& from, const fs::path& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      throw make_error(ErrorKind::Io, "rename ", from.string(), " -> ", to.string(), ": ",
                       std::generic_category().message(errno));
    }
  }

  void remove(const fs::path& path) override {
    if (::unlink(path.c_str()) != 0) throw_io("remove", path);
  }

  void sync_dir(const fs::path& dir) override {
    const int fd = open_or_throw(dir, O_RDONLY | O_DIRECTORY, "open directory");
    if (::fsync(fd) != 0) {
      const int err = errno;
      close_quietly(fd);
      throw_io("fsync directory", dir, err);
    }
    close_quietly(fd);
  }

  std::vector<std::string> list_dir(const fs::path& dir) override {
    std::error_code ec;
    std::vector<std::string> names;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      names.push_back(it->path().filename().string());
    }
    if (ec) throw_io("list directory", dir, ec.value());
    std::sort(names.begin(), names.end());
    return names;
  }

  void create_dirs(const fs::path& dir) override {
    // Walk up to the first existing ancestor, then create downwards, syncing each parent so
    // that the new directory entries survive a power loss.
    fs::path target = dir.lexically_normal();
    if (!target.has_filename()) target = target.parent_path();  // "a/b/" names "a/b"
    std::vector<fs::path> missing;
    for (fs::path p = target; !p.empty() && !exists(p); p = p.parent_path()) {
      missing.push_back(p);
      if (p == p.parent_path()) break;
    }
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
      if (::mkdir(it->c_str(), 0755) != 0 && errno != EEXIST) throw_io("create directory", *it);
      const fs::path parent = it->parent_path().empty() ? fs::path(".") : it->parent_path();
      sync_dir(parent);
    }
  }

  bool exists(const fs::path& path) override {
    std::error_code ec;
    const bool found = fs::exists(path, ec);
    if (ec) throw_io("stat", path, ec.value());
    return found;
  }
};

}  // namespace

Env& posix_env() {
  static PosixEnv env;
  return env;
}

}  // namespace meridian
