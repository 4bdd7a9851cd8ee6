#include "core/io/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <system_error>
#include <utility>

#include "core/io/io_error.hpp"
#include "core/util/error.hpp"

namespace meridian {

MappedFile MappedFile::open(const std::filesystem::path& path) {
  int fd;
  do fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC); while (fd < 0 && errno == EINTR);
  if (fd < 0) throw_io("open", path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw_io("stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw make_error(ErrorKind::Io, "map ", path.string(), ": not a regular file");
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  void* data = nullptr;
  if (size > 0) {
    data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw_io("map", path, err);
    }
  }
  ::close(fd);  // the mapping keeps the file's pages
  return MappedFile(path, data, size);
}

MappedFile::MappedFile(std::filesystem::path path, void* data, std::size_t size)
    : path_(std::move(path)), data_(data), size_(size) {}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this == &other) return *this;
  if (data_) ::munmap(data_, size_);
  path_ = std::move(other.path_);
  data_ = std::exchange(other.data_, nullptr);
  size_ = std::exchange(other.size_, 0);
  return *this;
}

void MappedFile::release_pages(std::size_t offset, std::size_t length) const {
  constexpr std::size_t kSpan = std::size_t{2} << 20;
  if (!data_ || offset >= size_) return;
  // Offsets within the mapping; mmap returns a page-aligned (and here span-relative) start.
  const auto base = reinterpret_cast<std::uintptr_t>(data_);
  const std::uintptr_t from = std::max(base, (base + offset) / kSpan * kSpan);
  const std::uintptr_t to = std::min(base + size_, (base + offset + length + kSpan - 1) / kSpan * kSpan);
  ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
}

void MappedFile::advise_random() const {
  if (data_) ::madvise(data_, size_, MADV_RANDOM);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

}  // namespace meridian
