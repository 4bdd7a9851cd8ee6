#pragma once
// The deltas a commit merges, still encoded, with their weights and the commit's share: the mean
// over any range of the model's values, decoded from that range's blocks alone (codec_parts.hpp's
// decode_range), a piece at a time. Each value of it is the whole mean's, bit for bit: the mean
// is taken value by value (weighted_mean), and a block decodes alike alone or in its whole.
//
// A site whose outer state is sharded hands these to its replicas instead of a whole mean: each
// takes the mean of the part it holds and of its mirror's, and no replica, its leader included,
// holds a whole decoded delta or a whole mean. Each replica gets only the blocks of those two
// parts (cut(): a codec codes each block alone, so a range's blocks are a delta of their own).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/model/shard_map.hpp"

namespace meridian {

// out = share x weighted_mean of values [offset, offset + out.size()) of `encoded`, each a delta
// of `values` values, in the listed order; commit_share's scaling as DeltaStore applies it (none
// at a share of 1). Error(Peer) when a delta does not decode or holds another count of values,
// Error(Data) as weighted_mean's (weights, non-finite values). InvariantError when the range is not
// inside the values.
void merged_mean(std::span<const std::span<const std::byte>> encoded, std::span<const double> weights, double share,
                 std::size_t values, std::size_t offset, std::span<float> out);

struct MergedDeltas {
  std::vector<std::vector<std::byte>> encoded;  // in the commit record's order, each of the values held
  std::vector<double> weights;                  // one per delta
  double share = 1;                             // commit_share: a stale or partial version moves less
  std::size_t values = 0;                       // the model's: every whole delta's
  // The ranges of the model's values each encoding holds, ascending, end to end; none: the whole.
  std::vector<ShardRange> held;
  // Per delta (or none at all): empty, or the name of a delta the site's replicas hold in parts
  // (crosssite/round/held_parts.hpp), whose encoding each replica fills in from its own (fill()).
  std::vector<std::string> refs{};
  // Beside refs, per delta: its site and round, under which each replica journals its part of a
  // delta held in parts (crosssite/round/delta_journal.hpp) as it fills it in.
  std::vector<std::pair<std::string, std::int64_t>> sources{};

  // Delta `i`'s encoding of the ranges held, in place of its ref.
  void fill(std::size_t i, std::vector<std::byte> encoding);
  bool filled() const;  // no ref left
  // merged_mean over these deltas. InvariantError when a non-empty range is not inside one range
  // held, or a delta is not filled in.
  void mean(std::size_t offset, std::span<float> out) const;
  // Whole deltas' blocks of `ranges` only (a ShardMap's parts: each begins at a block boundary and
  // ends at one or at the model's end; they are sorted, and adjacent or overlapping ones joined),
  // what a replica that holds those parts needs; their means are the whole deltas', bit for bit.
  // Error(Peer) as encoded_part's on a malformed delta.
  MergedDeltas cut(std::vector<ShardRange> ranges) const;
  // The bytes a site's leader hands its replicas, and back. InvariantError on bytes that are not
  // a pack (the replicas of a site run one binary).
  std::vector<std::byte> pack() const;
  static MergedDeltas unpack(std::span<const std::byte> bytes);
  bool operator==(const MergedDeltas&) const = default;
};

}  // namespace meridian
