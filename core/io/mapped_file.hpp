#pragma once
// A file mapped read-only into memory: its bytes without a copy, so a reader of a large file
// (a model's weights, a corpus shard) pages in only what it touches.
#include <cstddef>
#include <filesystem>
#include <span>

namespace meridian {

class MappedFile {
 public:
  // Error(Io) naming the path when it cannot be opened, sized or mapped. An empty file maps to
  // no bytes.
  static MappedFile open(const std::filesystem::path& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(data_), size_}; }
  const std::filesystem::path& path() const { return path_; }

  // Takes the pages around bytes [offset, offset + length) out of this process's resident memory
  // (the kernel's page cache keeps them; a later read maps them again). The range grows to 2 MiB
  // boundaries: a read fault maps its neighbours too (fault-around, 64 KiB by default, never
  // beyond a page table's 2 MiB), and they must go with it, or a reader that jumps about a large
  // file would end up with all of it resident.
  void release_pages(std::size_t offset, std::size_t length) const;
  // The reads that follow jump about (training windows): no read-ahead around each.
  void advise_random() const;

 private:
  MappedFile(std::filesystem::path path, void* data, std::size_t size);
  std::filesystem::path path_;
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace meridian
