#pragma once
// A site's flat buffers (parameters, gradients, optimizer moments, outer state) cut among its
// replicas, for state each replica keeps only a part of (ZeRO). The cut is in units: a unit is a
// whole number of the commit hash's chunks (kernels::kHashChunkBytes) and of the codecs' blocks,
// so a replica hashes and encodes whole chunks and blocks of its part, and sites cut differently
// still agree on every hash and every decoded value. Rank r owns units [floor(rU/M),
// floor((r+1)U/M)) of U: parts differ by at most one unit, and only the last unit may be short.
#include <cstddef>
#include <vector>

namespace meridian {

inline constexpr std::size_t kShardUnit = 4096;  // elements: 4 hash chunks of fp32

struct ShardRange {
  std::size_t offset = 0;  // in elements, into the flat buffer
  std::size_t count = 0;
  std::size_t end() const { return offset + count; }
  bool operator==(const ShardRange&) const = default;
};

class ShardMap {
 public:
  // InvariantError unless ranks >= 1 and unit is a positive multiple of a hash chunk's floats.
  ShardMap(std::size_t elements, int ranks, std::size_t unit = kShardUnit);

  int ranks() const { return static_cast<int>(counts_.size()); }
  std::size_t elements() const { return elements_; }
  std::size_t unit() const { return unit_; }
  std::size_t units() const { return (elements_ + unit_ - 1) / unit_; }

  ShardRange part(int rank) const;
  // Each rank's part in elements, in rank order: the cut the collectives take.
  const std::vector<std::size_t>& counts() const { return counts_; }
  int owner(std::size_t element) const;
  // The same cut of a range of the buffer: each rank's share of `range`, in rank order (the counts
  // a collective over that range alone takes).
  std::vector<std::size_t> cut(ShardRange range) const;

 private:
  std::size_t elements_;
  std::size_t unit_;
  std::vector<std::size_t> counts_;
};

}  // namespace meridian
