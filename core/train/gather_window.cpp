#include "core/train/gather_window.hpp"

#include <algorithm>

namespace meridian {

ShardRange gather_window(ShardRange wanted, std::size_t previous_offset, std::size_t total, std::size_t least) {
  if (wanted.count >= least) return wanted;
  if (wanted.offset >= previous_offset) {
    const std::size_t end = std::min(total, wanted.offset + least);
    return {wanted.offset, std::max(end, wanted.end()) - wanted.offset};
  }
  const std::size_t begin = wanted.end() > least ? wanted.end() - least : 0;
  return {std::min(begin, wanted.offset), wanted.end() - std::min(begin, wanted.offset)};
}

bool HeldRanges::covers(ShardRange range) const {
  if (range.count == 0) return true;
  for (const ShardRange& h : held_)
    if (h.offset <= range.offset && range.end() <= h.end()) return true;
  return false;
}

void HeldRanges::add(ShardRange range) {
  if (range.count == 0) return;
  std::vector<ShardRange> out;
  ShardRange merged = range;
  for (const ShardRange& h : held_) {
    if (h.end() < merged.offset || merged.end() < h.offset) {
      out.push_back(h);
      continue;
    }
    const std::size_t begin = std::min(h.offset, merged.offset), end = std::max(h.end(), merged.end());
    merged = {begin, end - begin};
  }
  out.push_back(merged);
  std::sort(out.begin(), out.end(), [](const ShardRange& a, const ShardRange& b) { return a.offset < b.offset; });
  held_ = std::move(out);
}

void HeldRanges::remove(ShardRange range) {
  std::vector<ShardRange> out;
  for (const ShardRange& h : held_) {
    if (h.end() <= range.offset || range.end() <= h.offset) {
      out.push_back(h);
      continue;
    }
    if (h.offset < range.offset) out.push_back({h.offset, range.offset - h.offset});
    if (range.end() < h.end()) out.push_back({range.end(), h.end() - range.end()});
  }
  held_ = std::move(out);
}

}  // namespace meridian
