#pragma once
// Payload buffers a link's caller has handed back (Link::recycle), reused for the next transfers
// it receives. Their pages are already mapped, so assembling into them costs one copy, where a
// fresh buffer first takes a page fault and a kernel zeroing per page (measured: a quarter of all
// CPU of a 256 MiB transfer; bench/README.md). Bounded in count and bytes.
#include <algorithm>
#include <cstddef>
#include <vector>

namespace meridian {

class BufferPool {
 public:
  static constexpr std::size_t kMaxBuffers = 4;
  static constexpr std::size_t kMaxBytes = std::size_t{1} << 30;

  // Keeps `buffer` (cleared) unless the pool is full, in which case the smallest goes.
  void put(std::vector<std::byte> buffer) {
    if (buffer.capacity() == 0) return;
    buffer.clear();
    buffers_.push_back(std::move(buffer));
    std::sort(buffers_.begin(), buffers_.end(),
              [](const auto& a, const auto& b) { return a.capacity() > b.capacity(); });
    while (buffers_.size() > kMaxBuffers || bytes() > kMaxBytes) buffers_.pop_back();
  }

  // The largest buffer kept (empty, with its capacity), or an empty vector when none is.
  std::vector<std::byte> take() {
    if (buffers_.empty()) return {};
    std::vector<std::byte> out = std::move(buffers_.front());
    buffers_.erase(buffers_.begin());
    return out;
  }

  std::size_t bytes() const {
    std::size_t n = 0;
    for (const auto& b : buffers_) n += b.capacity();
    return n;
  }

 private:
  std::vector<std::vector<std::byte>> buffers_;  // by capacity, largest first
};

}  // namespace meridian
