// A commit's deltas still encoded (crosssite/outer/merged_deltas): the mean of any range is the
// whole mean's values bit for bit, a sharded state's preview from them is the one from the whole
// mean (its mirror's too), and the pack a leader hands its replicas comes back as it went.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint.hpp"
#include "core/model/shard_map.hpp"
#include "core/util/error.hpp"
#include "crosssite/codec/codec.hpp"
#include "crosssite/codec/codec_parts.hpp"
#include "crosssite/outer/delta_mean.hpp"
#include "crosssite/outer/merged_deltas.hpp"
#include "crosssite/outer/outer_state.hpp"
#include "tests/support/error_of.hpp"

using namespace meridian;

namespace {

constexpr std::size_t kValues = 17 * kShardUnit + 500;  // more than one piece of the mean's decode
const CodecOptions kCodec{CodecKind::Int8, 256};

std::vector<std::byte> encoded_delta(int seed) {
  std::vector<float> delta(kValues);
  for (std::size_t i = 0; i < kValues; ++i)
    delta[i] = 1e-3f * static_cast<float>(static_cast<int>((i * 7 + static_cast<std::size_t>(seed)) % 23) - 11);
  std::vector<std::byte> out(encoded_size(kValues, kCodec));
  encode(delta, kCodec, out);
  return out;
}

MergedDeltas three_sites(double share) {
  return MergedDeltas{{encoded_delta(1), encoded_delta(2), encoded_delta(3)}, {100, 300, 50}, share, kValues, {}};
}

// The mean as a whole state's commit takes it: every delta decoded whole, weighted, scaled.
std::vector<float> whole_mean(const MergedDeltas& m) {
  std::vector<std::vector<float>> decoded;
  std::vector<std::span<const float>> views;
  for (const auto& e : m.encoded) {
    decoded.emplace_back(kValues);
    decode(e, decoded.back());
  }
  for (const auto& d : decoded) views.emplace_back(d);
  std::vector<float> mean(kValues);
  weighted_mean(views, m.weights, mean);
  if (m.share < 1.0)
    for (auto& x : mean) x = static_cast<float>(m.share * static_cast<double>(x));
  return mean;
}

}  // namespace

TEST_CASE("the mean of any range of encoded deltas is the whole mean's values, bit for bit") {
  for (const double share : {1.0, 0.625}) {
    CAPTURE(share);
    const auto merged = three_sites(share);
    const auto expected = whole_mean(merged);
    for (const auto& [offset, count] : std::vector<std::pair<std::size_t, std::size_t>>{
             {0, kValues}, {kShardUnit, kShardUnit}, {100, 70000}, {kValues - 3, 3}, {5, 0}}) {
      CAPTURE(offset);
      std::vector<float> part(count);
      merged.mean(offset, part);
      CHECK(std::equal(part.begin(), part.end(), expected.begin() + static_cast<std::ptrdiff_t>(offset)));
    }
  }
}

TEST_CASE("a sharded state's preview from encoded deltas is its preview from the whole mean, mirror included") {
  const auto initial = std::vector<float>(kValues, 0.5f);
  OuterState whole(initial, {}, kCodec, true);
  Checkpoint records;
  whole.save(records);
  const ShardMap map(kValues, 2);
  OuterState part(initial, {}, kCodec, true);
  part.restore(records, map.part(1), map.part(0));
  const auto merged = three_sites(0.8);
  const auto mean = whole_mean(merged);
  const auto from_mean = part.preview({0}, mean), from_deltas = part.preview(merged);
  CHECK(from_deltas.global == from_mean.global);
  CHECK(from_deltas.chunks == from_mean.chunks);
  CHECK(from_deltas.hash == from_mean.hash);
  REQUIRE(from_deltas.mirror != nullptr);
  CHECK(from_deltas.mirror->global == from_mean.mirror->global);
  CHECK_THROWS_AS(whole.preview(merged), InvariantError);  // a whole state takes the whole mean
}

TEST_CASE("a cut to a replica's part and mirror holds their blocks alone, and their means are the whole's") {
  const auto merged = three_sites(0.7);
  const auto expected = whole_mean(merged);
  const ShardMap map(kValues, 4);
  const auto whole_bytes = merged.pack().size();
  for (int rank = 0; rank < 4; ++rank) {
    CAPTURE(rank);
    // The part and the next rank's, as a sharded replica holds them: the last wraps to the first.
    const ShardRange part = map.part(rank), mirror = map.part((rank + 1) % 4);
    const auto cut = merged.cut({part, mirror});
    CHECK(cut.held.size() == (rank == 3 ? 2u : 1u));
    CHECK(static_cast<double>(cut.pack().size()) < 0.6 * static_cast<double>(whole_bytes));
    for (const ShardRange r : {part, mirror}) {
      std::vector<float> mean(r.count);
      cut.mean(r.offset, mean);
      CHECK(std::equal(mean.begin(), mean.end(), expected.begin() + static_cast<std::ptrdiff_t>(r.offset)));
    }
    CHECK(MergedDeltas::unpack(cut.pack()) == cut);
    std::vector<float> outside(3);
    CHECK_THROWS_AS(cut.mean(map.part((rank + 2) % 4).offset, outside), InvariantError);
  }
  // Ranges that cover the model keep the deltas whole; none keeps no bytes.
  CHECK(merged.cut({map.part(0), map.part(1), {2 * map.part(1).offset, kValues - 2 * map.part(1).offset}}) == merged);
  const auto none = merged.cut({});
  CHECK(none.encoded == std::vector<std::vector<std::byte>>(3));
  std::vector<float> nothing;
  none.mean(0, nothing);
}

TEST_CASE(
    "a delta held in parts goes by its name, cut or packed, and filled in from a replica's parts means as the whole") {
  const auto whole = three_sites(0.7);
  const auto expected = whole_mean(whole);
  auto named = whole;
  named.encoded[1].clear();  // site 2's: its replicas hold it in parts
  named.refs = {"", "tcp://b#7", ""};
  named.sources = {{"a", 3}, {"b", 7}, {"c", 2}};
  CHECK_FALSE(named.filled());
  std::vector<float> some(3);
  CHECK_THROWS_AS(named.mean(0, some), InvariantError);
  CHECK(MergedDeltas::unpack(named.pack()) == named);
  const ShardMap map(kValues, 4);
  for (int rank = 0; rank < 4; ++rank) {
    CAPTURE(rank);
    const ShardRange part = map.part(rank), mirror = map.part((rank + 1) % 4);
    auto cut = named.cut({part, mirror});
    CHECK(cut.refs == named.refs);
    CHECK(cut.sources == named.sources);
    CHECK(cut.encoded[1].empty());
    CHECK(MergedDeltas::unpack(cut.pack()) == cut);
    // What the replica fills in: its part and the next rank's, each encoded alone, joined in order.
    const auto first = std::min(part, mirror, [](auto a, auto b) { return a.offset < b.offset; });
    const auto second = first == part ? mirror : part;
    const std::vector<std::vector<std::byte>> pieces{encoded_part(whole.encoded[1], first.offset, first.count),
                                                     encoded_part(whole.encoded[1], second.offset, second.count)};
    cut.fill(1, join_encoded(pieces));
    CHECK(cut.filled());
    CHECK(cut == whole.cut({part, mirror}));
    std::vector<float> mean(part.count);
    cut.mean(part.offset, mean);
    CHECK(std::equal(mean.begin(), mean.end(), expected.begin() + static_cast<std::ptrdiff_t>(part.offset)));
    CHECK_THROWS_AS(cut.fill(0, {}), InvariantError);  // no delta held in parts
  }
}

TEST_CASE("the replicas' pack of encoded deltas comes back as it went, and a delta of another model is the peer's") {
  const auto merged = three_sites(0.5);
  CHECK(MergedDeltas::unpack(merged.pack()) == merged);
  CHECK(MergedDeltas::unpack(MergedDeltas{}.pack()) == MergedDeltas{});
  auto packed = merged.pack();
  packed.pop_back();
  CHECK_THROWS_AS(MergedDeltas::unpack(packed), InvariantError);
  auto other = merged;
  other.values = kValues + 1;
  std::vector<float> out(4);
  CHECK(testing::error_of(ErrorKind::Peer, [&] { other.mean(0, out); }).find("merged delta 0 of 3 holds") !=
        std::string::npos);
}
