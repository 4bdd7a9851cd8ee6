#pragma once
// A delta's encoding put together from its parts' encodings, and a part's encoding cut out of the
// whole's, byte for byte what encode() gives for the same values (codec.hpp's wire format). Every
// codec codes each block (or value) on its own, so a part that begins at a block boundary and,
// unless it is the last, ends at one, is coded exactly as the whole codes those values: the
// payload is a few regions (int8's and int4's scales and values; one for the others), each laid
// out in value order, and a part's share of each region is a contiguous run of its bytes.
//
// This is what lets the owners of parts of a site's weights (ShardMap's units are whole blocks)
// encode their parts alone, and the site still send the bytes an unsharded site would.
#include <array>
#include <cstddef>
#include <span>
#include <vector>

#include "crosssite/codec/codec.hpp"

namespace meridian {

// The encoding of the parts' values one after the other. Error(Peer) when a part is malformed or
// the parts disagree on the codec, or one but the last does not end at a block boundary (for
// int4, also at an even count): bytes from another replica are checked as any peer's.
std::vector<std::byte> join_encoded(std::span<const std::vector<std::byte>> parts);

// The encoding of values [offset, offset + count) of `whole`'s. Error(Peer) when `whole` is
// malformed; InvariantError when the range is not inside it or does not begin at a block boundary
// and end at one or at the end (a caller's cut, not the bytes, is wrong then).
std::vector<std::byte> encoded_part(std::span<const std::byte> whole, std::size_t offset, std::size_t count);

// How many values `whole` encodes; Error(Peer) when it is malformed (as encoded_part's check).
std::size_t encoded_count(std::span<const std::byte> whole);
// The size of `values` values coded as `encoded` is; Error(Peer) when it is malformed.
std::size_t encoded_size_as(std::span<const std::byte> encoded, std::size_t values);

// Values [offset, offset + out.size()) of `whole`'s, decoded from the blocks that hold them alone:
// exactly those values of a whole decode, without one. Any range inside the values (the blocks
// are the message's own, whatever a caller's cut). Error(Peer) when the bytes are malformed;
// InvariantError when the range is not inside the values.
void decode_range(std::span<const std::byte> whole, std::size_t offset, std::span<float> out);

// The run of values parts are cut on: lcm(kShardUnit, block) for the codecs that code blocks,
// kShardUnit for fp32 and bf16. A sharded outer state's parts are whole numbers of them (the last
// but one ends on one), so each part encodes alone and hashes alone (delta_digest.hpp).
std::size_t part_unit(const CodecOptions& codec);

// An encoded delta (a whole, or a part of one that begins on a unit) seen as runs of part_unit
// values, the last maybe shorter, without copying: run u's encoding, byte for byte what
// encoded_part gives for it, is its header (written into the caller's bytes) and then its share
// of each of the message's regions, views into the message.
class EncodedUnits {
 public:
  using Header = std::array<std::byte, kCodecHeaderBytes>;
  struct Pieces {  // a header and at most two regions' shares
    std::array<std::span<const std::byte>, 3> at{};
    std::size_t count = 0;
    std::span<const std::span<const std::byte>> all() const { return {at.data(), count}; }
  };
  // Error(Peer) when the bytes are malformed; they must outlive this.
  explicit EncodedUnits(std::span<const std::byte> encoded);
  std::size_t count() const { return (values_ + unit_ - 1) / unit_; }
  std::size_t values_per_unit() const { return unit_; }
  Pieces unit(std::size_t u, Header& header) const;

 private:
  std::span<const std::byte> encoded_;
  CodecOptions options_;
  std::size_t values_ = 0, unit_ = 1;
};

}  // namespace meridian
