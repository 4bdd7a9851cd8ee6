// sites/replica/kept_parts: a replica keeps the part of a peer's delta its rank holds under its
// group's cut, and reports it; a part of another cut, of another rank or of no delta is refused;
// a reform lets go of what was kept, and the bound lets go of the oldest. cut_part_on cuts what a
// peer that takes parts gets.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/model/shard_map.hpp"
#include "crosssite/codec/codec.hpp"
#include "crosssite/codec/codec_parts.hpp"
#include "crosssite/codec/delta_digest.hpp"
#include "crosssite/round/held_parts.hpp"
#include "sites/replica/kept_parts.hpp"
#include "tests/support/encoded_values.hpp"

using namespace meridian;

namespace {

const CodecOptions kCodec{CodecKind::Int8, 256};
constexpr std::size_t kValues = 5 * kShardUnit + 300;

// Part `index` of `count` of `whole` as it travels (a part stripe), read back.
struct Travelled {
  std::vector<std::byte> bytes;
  Stripe stripe;
  Travelled(const std::vector<std::byte>& part, std::uint64_t id, int index, int count)
      : bytes(make_part_stripe(id, 1, part, index, count)), stripe(read_stripe(bytes)) {}
};

}  // namespace

TEST_CASE(
    "a replica keeps its rank's part of a delta and reports it, and the reports judge the delta as its bytes do") {
  const auto whole = testing::encoded(testing::normal_values(kValues, 3, 1e-3), kCodec);
  const ShardMap map(kValues, 3, part_unit(kCodec));
  std::vector<KeptParts> replicas(3);
  std::vector<std::vector<std::byte>> reports;
  for (int rank = 0; rank < 3; ++rank) {
    auto& kept = replicas[static_cast<std::size_t>(rank)];
    kept.reform(rank, map);
    const auto part = cut_part_on(whole, rank, 3, part_unit(kCodec));
    CHECK(part == encoded_part(whole, map.part(rank).offset, map.part(rank).count));
    const Travelled t(part, 9, rank, 3);
    auto report = kept.keep("tcp://peer:1", t.stripe);
    REQUIRE(report.has_value());
    reports.push_back(*report);
    REQUIRE(kept.part(parts_ref("tcp://peer:1", 9)) != nullptr);
    CHECK(*kept.part(parts_ref("tcp://peer:1", 9)) == part);
    CHECK(kept.held_bytes() == part.size());
  }
  const auto held = held_in_parts(reports, parts_ref("tcp://peer:1", 9));
  REQUIRE(held.has_value());
  CHECK(delta_digest(std::span<const Digest>(held->units)) == delta_digest(std::span<const std::byte>(whole)));

  // Another rank's part, a part cut for a group of another size, bytes of no delta: refused.
  KeptParts& first = replicas[0];
  const Travelled other_rank(cut_part_on(whole, 1, 3, part_unit(kCodec)), 10, 1, 3);
  CHECK_FALSE(first.keep("tcp://peer:1", other_rank.stripe).has_value());
  const Travelled other_cut(cut_part_on(whole, 0, 2, part_unit(kCodec)), 11, 0, 2);
  CHECK_FALSE(first.keep("tcp://peer:1", other_cut.stripe).has_value());
  const std::vector<std::byte> junk(40, std::byte{3});
  const Travelled no_delta(junk, 12, 0, 3);
  CHECK_FALSE(first.keep("tcp://peer:1", no_delta.stripe).has_value());
  CHECK(first.refused() == 3);

  // A commit's apply lets go of what it merged; a reform of everything.
  first.forget(parts_ref("tcp://peer:1", 9));
  CHECK(first.part(parts_ref("tcp://peer:1", 9)) == nullptr);
  auto& second = replicas[1];
  second.reform(1, map);
  CHECK(second.part(parts_ref("tcp://peer:1", 9)) == nullptr);
  CHECK(second.held_bytes() == 0);
}

TEST_CASE("a replica keeps at most its bound of parts, the oldest let go first") {
  const auto whole = testing::encoded(testing::normal_values(kValues, 4, 1e-3), kCodec);
  const ShardMap map(kValues, 2, part_unit(kCodec));
  KeptParts kept(2);
  kept.reform(0, map);
  const auto part = cut_part_on(whole, 0, 2, part_unit(kCodec));
  for (std::uint64_t id = 1; id <= 3; ++id) CHECK(kept.keep("p", Travelled(part, id, 0, 2).stripe).has_value());
  CHECK(kept.part(parts_ref("p", 1)) == nullptr);
  CHECK(kept.part(parts_ref("p", 2)) != nullptr);
  CHECK(kept.part(parts_ref("p", 3)) != nullptr);
}

TEST_CASE(
    "a transfer's part taken once is kept as first taken: a second copy, even with other bytes, is refused, also once "
    "let go") {
  // The leader judged the first copy's report: a later copy (a duplicate on the way, bytes a
  // peer sent again differently) must not become what the apply fills in.
  const auto whole = testing::encoded(testing::normal_values(kValues, 5, 1e-3), kCodec);
  const auto other = testing::encoded(testing::normal_values(kValues, 6, 1e-3), kCodec);
  const ShardMap map(kValues, 2, part_unit(kCodec));
  KeptParts kept(2);
  kept.reform(0, map);
  const auto part = cut_part_on(whole, 0, 2, part_unit(kCodec));
  REQUIRE(kept.keep("p", Travelled(part, 1, 0, 2).stripe).has_value());
  CHECK_FALSE(kept.keep("p", Travelled(part, 1, 0, 2).stripe).has_value());
  CHECK_FALSE(kept.keep("p", Travelled(cut_part_on(other, 0, 2, part_unit(kCodec)), 1, 0, 2).stripe).has_value());
  REQUIRE(kept.part(parts_ref("p", 1)) != nullptr);
  CHECK(*kept.part(parts_ref("p", 1)) == part);
  CHECK(kept.refused() == 2);
  // Let go by the bound, it is still not taken again; another peer's transfer of that number is its own.
  for (std::uint64_t id = 2; id <= 3; ++id) CHECK(kept.keep("p", Travelled(part, id, 0, 2).stripe).has_value());
  CHECK(kept.part(parts_ref("p", 1)) == nullptr);
  CHECK_FALSE(kept.keep("p", Travelled(part, 1, 0, 2).stripe).has_value());
  CHECK(kept.keep("q", Travelled(part, 1, 0, 2).stripe).has_value());
  // A reform starts afresh: the new group's cut is another one.
  kept.reform(0, map);
  CHECK(kept.keep("p", Travelled(part, 1, 0, 2).stripe).has_value());
}

TEST_CASE("a group left with one replica keeps no part: what was kept is gone, and every part after is refused") {
  const auto whole = testing::encoded(testing::normal_values(kValues, 7, 1e-3), kCodec);
  const ShardMap map(kValues, 2, part_unit(kCodec));
  KeptParts kept;
  kept.reform(0, map);
  const auto part = cut_part_on(whole, 0, 2, part_unit(kCodec));
  REQUIRE(kept.keep("p", Travelled(part, 1, 0, 2).stripe).has_value());
  kept.reform(0, std::nullopt);
  CHECK(kept.held_bytes() == 0);
  CHECK_FALSE(kept.keep("p", Travelled(part, 2, 0, 2).stripe).has_value());
  CHECK(kept.refused() == 1);
}
