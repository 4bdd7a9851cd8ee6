// A delta's encoding from its parts' encodings and back: byte for byte what encode() gives for
// every codec, cut as ShardMap cuts a site's buffers among 1 to 4 replicas (uneven last part).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/model/shard_map.hpp"
#include "core/util/error.hpp"
#include "crosssite/codec/codec.hpp"
#include "crosssite/codec/codec_parts.hpp"
#include "tests/support/encoded_values.hpp"
#include "tests/support/error_of.hpp"

using namespace meridian;

namespace {

using testing::encoded;
std::vector<float> values(std::size_t n, std::uint64_t seed) { return testing::normal_values(n, seed); }

const CodecOptions kCodecs[] = {{CodecKind::Fp32, 256, 0},
                                {CodecKind::Bf16, 256, 0},
                                {CodecKind::Int8, 256, 0},
                                {CodecKind::Int4, 256, 0},
                                {CodecKind::Sparse, 256, 16},
                                {CodecKind::Sparse, 1024, 7}};

std::string name(const CodecOptions& o) {
  return std::string(to_string(o.kind)) + " block " + std::to_string(o.block) + " keep " + std::to_string(o.keep);
}

}  // namespace

TEST_CASE("parts encoded alone join to the whole's encoding, and the whole cuts back into them") {
  // 5.3 units: at 3 and 4 ranks the parts differ by a unit, and the last is short.
  const std::size_t n = 5 * kShardUnit + 1234;
  const auto x = values(n, 7);
  for (const auto& o : kCodecs)
    for (int ranks = 1; ranks <= 4; ++ranks) {
      CAPTURE(name(o));
      CAPTURE(ranks);
      const ShardMap map(n, ranks);
      const auto whole = encoded(x, o);
      std::vector<std::vector<std::byte>> parts;
      for (int r = 0; r < ranks; ++r) {
        const ShardRange p = map.part(r);
        parts.push_back(encoded(std::span(x).subspan(p.offset, p.count), o));
        CHECK(encoded_part(whole, p.offset, p.count) == parts.back());
      }
      CHECK(join_encoded(parts) == whole);
    }
}

TEST_CASE("an empty part and a part of one block join too") {
  const auto x = values(3 * 256 + 5, 3);
  for (const auto& o : kCodecs) {
    if (o.block != 256) continue;
    CAPTURE(name(o));
    const std::span<const float> all(x);
    const std::vector<std::vector<std::byte>> parts{encoded(all.subspan(0, 0), o), encoded(all.subspan(0, 256), o),
                                                    encoded(all.subspan(256), o)};
    CHECK(join_encoded(parts) == encoded(x, o));
    CHECK(encoded_part(encoded(x, o), 3 * 256, 5) == encoded(all.subspan(3 * 256), o));
  }
}

TEST_CASE("parts that cannot be one delta's are refused, naming the part") {
  const auto x = values(1024, 5);
  const std::span<const float> all(x);
  const CodecOptions int8{CodecKind::Int8, 256, 0};
  const auto a = encoded(all.subspan(0, 512), int8);
  const auto b = encoded(all.subspan(512), int8);
  auto expect_peer = [](const std::vector<std::vector<std::byte>>& parts, const std::string& says) {
    try {
      join_encoded(parts);
      FAIL("joined");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Peer);
      CHECK_MESSAGE(std::string(e.what()).find(says) != std::string::npos, std::string(e.what()));
    }
  };
  expect_peer({a, encoded(all.subspan(512), {CodecKind::Int4, 256, 0})}, "encoded part 1 of 2: coded as int4");
  expect_peer({a, encoded(all.subspan(512), {CodecKind::Int8, 128, 0})}, "block 128");
  expect_peer({encoded(all.subspan(0, 500), int8), encoded(all.subspan(500), int8)},
              "encoded part 0 of 2: 500 values, not a whole number of 256-value blocks");
  auto short_one = b;
  short_one.resize(short_one.size() - 1);
  expect_peer({a, short_one}, "encoded part 1 of 2: 535 bytes for 512 values of int8, expected 536");
  auto bad_version = b;
  bad_version[1] = std::byte{9};
  expect_peer({a, bad_version}, "format version 9");
  expect_peer({a, std::vector<std::byte>(3)}, "3 bytes, shorter than the codec's header");
  auto unknown = b;
  unknown[0] = std::byte{42};
  expect_peer({unknown, a}, "encoded part 0 of 2: unknown codec id 42");
  // A count whose encoded size wraps around to the part's real size: refused before any arithmetic.
  auto wrapping = encoded(all.subspan(0, 32), {CodecKind::Bf16, 0, 0});
  const std::uint64_t huge = (std::uint64_t{1} << 63) + 32;
  std::memcpy(wrapping.data() + 8, &huge, sizeof huge);
  expect_peer({wrapping}, "claims 9223372036854775840 values");
}

TEST_CASE("a part that does not begin at a block boundary is the caller's bug") {
  const auto x = values(1024, 9);
  const auto whole = encoded(x, {CodecKind::Int8, 256, 0});
  CHECK_THROWS_AS(encoded_part(whole, 100, 256), InvariantError);
  CHECK_THROWS_AS(encoded_part(whole, 256, 100), InvariantError);
  CHECK_THROWS_AS(encoded_part(whole, 768, 512), InvariantError);
  CHECK(encoded_part(whole, 1024, 0).size() == kCodecHeaderBytes);
}

TEST_CASE("any range of a delta decodes from its own blocks to exactly the whole decode's values") {
  const std::size_t n = 3 * 1024 + 77;
  const auto x = values(n, 11);
  const std::pair<std::size_t, std::size_t> ranges[] = {{0, n},       {0, 1},     {255, 2},     {256, 1024},
                                                        {1000, 1500}, {n - 1, 1}, {n - 77, 77}, {513, 0}};
  for (const auto& o : kCodecs) {
    CAPTURE(name(o));
    const auto whole = encoded(x, o);
    CHECK(encoded_count(whole) == n);
    std::vector<float> all(n);
    decode(whole, all);
    for (const auto& [offset, count] : ranges) {
      CAPTURE(offset);
      CAPTURE(count);
      std::vector<float> part(count);
      decode_range(whole, offset, part);
      CHECK(std::equal(part.begin(), part.end(), all.begin() + static_cast<std::ptrdiff_t>(offset)));
    }
  }
}

TEST_CASE("a range past the values is the caller's bug, malformed bytes the peer's") {
  const auto whole = encoded(values(1000, 2), {CodecKind::Int8, 256, 0});
  std::vector<float> out(10);
  CHECK_THROWS_AS(decode_range(whole, 995, out), InvariantError);
  auto short_by_one = whole;
  short_by_one.pop_back();
  CHECK(testing::error_of(ErrorKind::Peer, [&] { decode_range(short_by_one, 0, out); }).find("bytes for 1000 values") !=
        std::string::npos);
  testing::error_of(ErrorKind::Peer, [&] { encoded_count(std::span(whole).first(8)); });
}
