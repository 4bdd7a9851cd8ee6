#include "core/util/pages.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/util/error.hpp"

namespace meridian {
namespace {

std::uintptr_t page_size() {
  static const auto size = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  return size;
}

// The whole pages inside [begin, end): [first, last), empty when there are none.
struct Inner {
  std::uintptr_t first, last;
};
Inner inner_pages(std::uintptr_t begin, std::uintptr_t end) {
  const std::uintptr_t p = page_size();
  const std::uintptr_t first = (begin + p - 1) / p * p, last = end / p * p;
  return first < last ? Inner{first, last} : Inner{begin, begin};
}

}  // namespace

void release_pages(void* data, std::size_t bytes) {
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const Inner in = inner_pages(begin, begin + bytes);
  if (in.first == in.last) return;
  // Private anonymous memory (every heap buffer): MADV_DONTNEED drops the pages at once and the
  // next touch maps a zero page.
  MERIDIAN_CHECK(madvise(reinterpret_cast<void*>(in.first), in.last - in.first, MADV_DONTNEED) == 0,
                 "madvise(DONTNEED) of ", in.last - in.first, " bytes at ", data, ": ", std::strerror(errno));
}

void zero_and_release(void* data, std::size_t bytes) {
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const Inner in = inner_pages(begin, begin + bytes);
  if (in.first == in.last) {
    std::memset(data, 0, bytes);
    return;
  }
  std::memset(data, 0, in.first - begin);
  std::memset(reinterpret_cast<void*>(in.last), 0, begin + bytes - in.last);
  release_pages(data, bytes);
}

// The pages a buffer of `bytes` spans, and one more that no access is allowed to: the buffer ends
// as close to it as 64-byte alignment allows, so that running past its end faults at once (no
// heap red zone, AddressSanitizer's included, sees inside a mapping).
std::size_t mapped_body(std::size_t bytes) {
  return (std::max<std::size_t>(bytes, 1) + page_size() - 1) / page_size() * page_size();
}

void* map_zero_pages(std::size_t bytes) {
  const std::size_t body = mapped_body(bytes);
  void* base = mmap(nullptr, body + page_size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) throw std::bad_alloc();
  auto* first = static_cast<std::byte*>(base);
  MERIDIAN_CHECK(mprotect(first + body, page_size(), PROT_NONE) == 0, "mprotect of the guard page after ", body,
                 " bytes: ", std::strerror(errno));
  return first + ((body - bytes) & ~std::size_t{63});
}

void unmap_pages(void* data, std::size_t bytes) {
  void* base = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(data) / page_size() * page_size());
  MERIDIAN_CHECK(munmap(base, mapped_body(bytes) + page_size()) == 0, "munmap of ", bytes, " bytes at ", data, ": ",
                 std::strerror(errno));
}

std::size_t resident_bytes(const void* data, std::size_t bytes) {
  if (bytes == 0) return 0;
  const std::uintptr_t p = page_size(), begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t first = begin / p * p, last = (begin + bytes + p - 1) / p * p;
  std::vector<unsigned char> in_core((last - first) / p);
  MERIDIAN_CHECK(mincore(reinterpret_cast<void*>(first), last - first, in_core.data()) == 0, "mincore of ",
                 last - first, " bytes at ", data, ": ", std::strerror(errno));
  std::size_t pages = 0;
  for (unsigned char c : in_core) pages += c & 1u;
  return pages * p;
}

}  // namespace meridian
