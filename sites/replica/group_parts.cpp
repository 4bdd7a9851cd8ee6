#include "sites/replica/group_parts.hpp"

#include <cstdint>
#include <cstring>

#include "core/util/error.hpp"
#include "sites/replica/outer_cut.hpp"

namespace meridian {

GroupParts::GroupParts(Communicator& group, const ShardMap& map) : group_(group), map_(map) {
  MERIDIAN_CHECK(map.ranks() == group.size(), "an outer cut of ", map.ranks(), " parts for a group of ", group.size());
}

std::vector<std::vector<std::byte>> GroupParts::gather(std::span<const std::byte> mine) { return group_.gather(mine, 0); }

std::vector<std::vector<std::byte>> GroupParts::all_gather(std::span<const std::byte> mine) {
  auto parts = group_.gather(mine, 0);
  // The bundle: each part's size, then the parts, in rank order.
  std::vector<std::byte> bundle;
  if (group_.rank() == 0) {
    for (const auto& p : parts) {
      const std::uint64_t size = p.size();
      const auto* b = reinterpret_cast<const std::byte*>(&size);
      bundle.insert(bundle.end(), b, b + sizeof size);
    }
    for (const auto& p : parts) bundle.insert(bundle.end(), p.begin(), p.end());
  }
  std::uint64_t total = bundle.size();
  group_.broadcast(std::as_writable_bytes(std::span(&total, 1)), 0);
  bundle.resize(total);
  group_.broadcast(bundle, 0);
  if (group_.rank() == 0) return parts;
  const std::size_t ranks = static_cast<std::size_t>(group_.size());
  MERIDIAN_CHECK(total >= ranks * sizeof(std::uint64_t), "a bundle of ", total, " bytes for ", ranks, " parts");
  parts.assign(ranks, {});
  std::size_t at = ranks * sizeof(std::uint64_t);
  for (std::size_t r = 0; r < ranks; ++r) {
    std::uint64_t size = 0;
    std::memcpy(&size, bundle.data() + r * sizeof size, sizeof size);
    MERIDIAN_CHECK(at + size <= total, "part ", r, " of ", size, " bytes at ", at, " of a ", total, "-byte bundle");
    parts[r].assign(bundle.begin() + static_cast<std::ptrdiff_t>(at), bundle.begin() + static_cast<std::ptrdiff_t>(at + size));
    at += size;
  }
  return parts;
}

void GroupParts::all_gather(std::span<float> values) {
  MERIDIAN_CHECK(values.size() == map_.elements(), values.size(), " values for an outer cut of ", map_.elements());
  group_.all_gather(values, map_.counts());
}

std::size_t GroupParts::recut(OuterState& state, std::span<float> weights) {
  return cut_outer_state(group_, state, map_, weights, true).bytes;
}

}  // namespace meridian
