// crosssite/round/held_parts: what the replicas of a site report of the parts of a delta they keep,
// and the leader's view put together from the reports: the whole's digest and its screen's verdict,
// bit for bit, for every cut of 1 to 4 replicas; reports of different cuts do not join.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/model/shard_map.hpp"
#include "core/util/error.hpp"
#include "crosssite/codec/codec.hpp"
#include "crosssite/codec/codec_parts.hpp"
#include "crosssite/codec/delta_digest.hpp"
#include "crosssite/round/held_parts.hpp"
#include "tests/support/encoded_values.hpp"

using namespace meridian;

namespace {

const CodecOptions kCodec{CodecKind::Int8, 256};
constexpr std::size_t kValues = 7 * kShardUnit + 1000;

// What replica `rank` of `ranks` reports of its part of `whole`.
std::vector<std::byte> report_of(const std::vector<std::byte>& whole, const ShardMap& map, int rank) {
  const ShardRange part = map.part(rank);
  const auto bytes = encoded_part(whole, part.offset, part.count);
  PartReport report{unit_digests(bytes), DeltaScreen::Tally(part.offset)};
  std::vector<float> values(part.count);
  decode(bytes, values);
  report.tally.add(values);
  return encode_part_report(report);
}

}  // namespace

TEST_CASE("the reports of a delta's parts put together judge it as its bytes do, at 1 to 4 replicas") {
  auto x = testing::normal_values(kValues, 5, 1e-3);
  DeltaScreen screen;
  for (const double n : {0.05, 0.06, 0.055}) screen.accept(n);
  for (const bool huge : {false, true}) {  // a delta the screen passes, and one it refuses for its norm
    CAPTURE(huge);
    if (huge)
      for (auto& v : x) v *= 1000;
    const auto whole = testing::encoded(x, kCodec);
    std::vector<float> decoded(kValues);
    decode(whole, decoded);
    const auto verdict = screen.check(decoded, kValues);
    for (int ranks = 1; ranks <= 4; ++ranks) {
      CAPTURE(ranks);
      const ShardMap map(kValues, ranks, part_unit(kCodec));
      std::vector<std::vector<std::byte>> reports;
      for (int r = 0; r < ranks; ++r) reports.push_back(report_of(whole, map, r));
      const auto held = held_in_parts(reports, parts_ref("tcp://peer:1", 42));
      REQUIRE(held.has_value());
      CHECK(held->ref == "tcp://peer:1#42");
      CHECK(delta_digest(std::span<const Digest>(held->units)) == delta_digest(std::span<const std::byte>(whole)));
      const auto judged = screen.judge(held->tally, kValues);
      CHECK(judged.ok == verdict.ok);
      CHECK(judged.norm == verdict.norm);
      CHECK(judged.reason == verdict.reason);
      CHECK(judged.ok != huge);
    }
  }
}

TEST_CASE("reports of parts cut for different groups do not join, and a report comes back as it went") {
  const auto whole = testing::encoded(testing::normal_values(kValues, 6, 1e-3), kCodec);
  const ShardMap two(kValues, 2, part_unit(kCodec)), three(kValues, 3, part_unit(kCodec));
  const std::vector<std::vector<std::byte>> mixed{report_of(whole, two, 0), report_of(whole, three, 1)};
  CHECK_FALSE(held_in_parts(mixed, "x").has_value());
  const std::vector<std::vector<std::byte>> late_first{report_of(whole, two, 1), report_of(whole, two, 0)};
  CHECK_FALSE(held_in_parts(late_first, "x").has_value());
  const auto bytes = report_of(whole, three, 2);
  const auto report = decode_part_report(bytes);
  CHECK(encode_part_report(report) == bytes);
  CHECK(report.tally.first() == three.part(2).offset);
  auto cut = bytes;
  cut.pop_back();
  CHECK_THROWS_AS(decode_part_report(cut), InvariantError);
}
