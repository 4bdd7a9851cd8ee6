#pragma once
// Memory pages a buffer holds, and giving them back. A ZeRO stage-2 replica keeps the gradients of
// its own part only: the rest of the flat gradient buffer is handed back to the kernel once it is
// reduced, so the buffer keeps its layout (every view and offset stays valid) while holding 1/M of
// its bytes. The kernel fills a released page with zeros when it is touched again.
#include <cstddef>
#include <span>

namespace meridian {

// Returns the whole pages inside [data, data + bytes) to the kernel: they read as zero afterwards.
// Bytes on the partial pages at either end are left as they are.
void release_pages(void* data, std::size_t bytes);

// Sets [data, data + bytes) to zero, releasing the whole pages inside it rather than writing them.
void zero_and_release(void* data, std::size_t bytes);

// The bytes of the pages overlapping [data, data + bytes) that are resident (mincore(2)).
std::size_t resident_bytes(const void* data, std::size_t bytes);

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
