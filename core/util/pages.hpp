#pragma once
// Memory pages a buffer holds, and giving them back. A ZeRO stage-2 replica keeps the gradients of
// its own part only: the rest of the flat gradient buffer is handed back to the kernel once it is
// reduced, so the buffer keeps its layout (every view and offset stays valid) while holding 1/M of
// its bytes. The kernel fills a released page with zeros when it is touched again.
#include <cstddef>
#include <new>
#include <span>
#include <utility>
#include <vector>

namespace meridian {

// Returns the whole pages inside [data, data + bytes) to the kernel: they read as zero afterwards.
// Bytes on the partial pages at either end are left as they are.
void release_pages(void* data, std::size_t bytes);

// Sets [data, data + bytes) to zero, releasing the whole pages inside it rather than writing them.
void zero_and_release(void* data, std::size_t bytes);

// The bytes of the pages overlapping [data, data + bytes) that are resident (mincore(2)).
std::size_t resident_bytes(const void* data, std::size_t bytes);

// Fresh pages of the kernel's (reading as zero) that hold nothing until written: a buffer of them
// costs memory only where it is touched. 64-byte aligned, and ending within 64 bytes of a page no
// access is allowed to (an overrun faults). bad_alloc when none are left.
void* map_zero_pages(std::size_t bytes);
void unmap_pages(void* data, std::size_t bytes);

// A vector's storage from map_zero_pages, whose elements a resize leaves as the pages have them
// (zero) rather than writing them: a model's flat buffers are allocated whole, and a replica that
// keeps a part of them (ZeRO stage 3) holds only the pages it writes.
template <class T>
struct ZeroPageAllocator {
  using value_type = T;
  ZeroPageAllocator() = default;
  template <class U>
  ZeroPageAllocator(const ZeroPageAllocator<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(map_zero_pages(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) { unmap_pages(p, n * sizeof(T)); }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (sizeof...(Args) == 0)
      ::new (static_cast<void*>(p)) U;
    else
      ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <class U>
  bool operator==(const ZeroPageAllocator<U>&) const {
    return true;
  }
};
template <class T>
using ZeroPageVector = std::vector<T, ZeroPageAllocator<T>>;

template <class T>
void release_pages(std::span<T> s) {
  release_pages(static_cast<void*>(s.data()), s.size_bytes());
}
template <class T>
void zero_and_release(std::span<T> s) {
  zero_and_release(static_cast<void*>(s.data()), s.size_bytes());
}
template <class T>
std::size_t resident_bytes(std::span<T> s) {
  return resident_bytes(static_cast<const void*>(s.data()), s.size_bytes());
}

}  // namespace meridian
