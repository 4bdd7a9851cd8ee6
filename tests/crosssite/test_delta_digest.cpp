// crosssite/codec/delta_digest: a delta's digest from its bytes equals the one put together from
// the unit digests of its parts, each encoded alone, however a site of 1 to 4 replicas cuts it;
// it tells any change of the bytes; malformed bytes are the peer's error.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/model/shard_map.hpp"
#include "core/util/error.hpp"
#include "crosssite/codec/codec.hpp"
#include "crosssite/codec/codec_parts.hpp"
#include "crosssite/codec/delta_digest.hpp"
#include "tests/support/encoded_values.hpp"
#include "tests/support/error_of.hpp"

using namespace meridian;

namespace {

using testing::encoded;
std::vector<float> values(std::size_t n, std::uint64_t seed) { return testing::normal_values(n, seed); }

}  // namespace

TEST_CASE("a delta's digest is the same from its bytes and from its parts' unit digests, for every cut on units") {
  const CodecOptions codecs[] = {{CodecKind::Fp32, 256, 0},   {CodecKind::Bf16, 256, 0}, {CodecKind::Int8, 256, 0},
                                 {CodecKind::Int4, 256, 0},   {CodecKind::Int8, 384, 0}, {CodecKind::Sparse, 256, 16},
                                 {CodecKind::Sparse, 1024, 7}};
  for (const auto& codec : codecs) {
    CAPTURE(to_string(codec.kind));
    CAPTURE(codec.block);
    const std::size_t unit = part_unit(codec);
    CHECK(unit % kShardUnit == 0);
    if (codec.kind != CodecKind::Fp32 && codec.kind != CodecKind::Bf16) CHECK(unit % codec.block == 0);
    const std::size_t n = 5 * unit + unit / 3;  // the last unit is short
    const auto x = values(n, 7);
    const auto whole = encoded(x, codec);
    const Digest digest = delta_digest(std::span<const std::byte>(whole));
    CHECK(unit_digests(whole).size() == 6);
    CHECK(EncodedUnits(whole).values_per_unit() == unit);  // read from the message's header
    CHECK(digest != sha256(whole));  // not the plain hash: that one no part's holder can compute
    for (int ranks = 1; ranks <= 4; ++ranks) {
      CAPTURE(ranks);
      const ShardMap map(n, ranks, unit);
      std::vector<Digest> units;
      for (int r = 0; r < ranks; ++r) {
        const ShardRange part = map.part(r);
        // What the part's owner encodes and hashes alone, never seeing the others' values.
        const auto own = encoded(std::span<const float>(x).subspan(part.offset, part.count), codec);
        const auto mine = unit_digests(own);
        units.insert(units.end(), mine.begin(), mine.end());
        CHECK(unit_digests(encoded_part(whole, part.offset, part.count)) == mine);
      }
      CHECK(delta_digest(std::span<const Digest>(units)) == digest);
    }
  }
}

TEST_CASE("a delta's digest changes with any byte of its values, scales or header, and malformed bytes are refused") {
  const CodecOptions codec{CodecKind::Int8, 256, 0};
  const auto x = values(3 * kShardUnit + 100, 3);
  const auto whole = encoded(x, codec);
  const Digest digest = delta_digest(std::span<const std::byte>(whole));
  for (const std::size_t at : {std::size_t{20}, whole.size() / 2, whole.size() - 1}) {
    auto changed = whole;
    changed[at] ^= std::byte{1};
    CHECK(delta_digest(std::span<const std::byte>(changed)) != digest);
  }
  auto other_count = encoded(std::span<const float>(x).first(x.size() - 256), codec);
  CHECK(delta_digest(std::span<const std::byte>(other_count)) != digest);
  const std::vector<std::byte> short_bytes(whole.begin(), whole.end() - 1);
  CHECK(testing::error_of(ErrorKind::Peer, [&] {
          delta_digest(std::span<const std::byte>(short_bytes));
        }).find("bytes for") != std::string::npos);
  const std::vector<std::byte> nothing;
  CHECK(testing::error_of(ErrorKind::Peer, [&] { unit_digests(nothing); }).find("header") != std::string::npos);
}
