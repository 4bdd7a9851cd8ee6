#include "core/model/shard_map.hpp"

#include <algorithm>

#include "core/util/error.hpp"
#include "kernels/cpu/chunk_hash.hpp"

namespace meridian {

ShardMap::ShardMap(std::size_t elements, int ranks, std::size_t unit) : elements_(elements), unit_(unit) {
  constexpr std::size_t chunk = kernels::kHashChunkBytes / sizeof(float);
  MERIDIAN_CHECK(ranks >= 1 && unit > 0 && unit % chunk == 0, "ranks=", ranks, " unit=", unit, " chunk=", chunk);
  const std::size_t u = units();
  const auto m = static_cast<std::size_t>(ranks);
  counts_.resize(m);
  for (std::size_t r = 0; r < m; ++r) {
    const std::size_t first = r * u / m * unit_, last = (r + 1) * u / m * unit_;
    counts_[r] = std::min(last, elements_) - std::min(first, elements_);
  }
}

ShardRange ShardMap::part(int rank) const {
  MERIDIAN_CHECK(rank >= 0 && rank < ranks(), "rank=", rank, " ranks=", ranks());
  const auto r = static_cast<std::size_t>(rank);
  return {std::min(r * units() / counts_.size() * unit_, elements_), counts_[r]};
}

std::vector<std::size_t> ShardMap::cut(ShardRange range) const {
  MERIDIAN_CHECK(range.end() <= elements_, "range ", range.offset, "+", range.count, " of ", elements_);
  std::vector<std::size_t> counts;
  for (int r = 0; r < ranks(); ++r) {
    const ShardRange p = part(r);
    const std::size_t from = std::max(p.offset, range.offset), to = std::min(p.end(), range.end());
    counts.push_back(to > from ? to - from : 0);
  }
  return counts;
}

int ShardMap::owner(std::size_t element) const {
  MERIDIAN_CHECK(element < elements_, "element=", element, " elements=", elements_);
  // The inverse of part(): the last rank whose first unit is at or before the element's.
  const std::size_t unit = element / unit_, u = units(), m = counts_.size();
  std::size_t r = std::min(m - 1, (unit * m + m - 1) / u);
  while (r * u / m > unit) --r;
  while (r + 1 < m && (r + 1) * u / m <= unit) ++r;
  return static_cast<int>(r);
}

}  // namespace meridian
