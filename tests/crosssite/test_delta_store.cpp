// crosssite/round/delta_store: a delta its replicas hold in parts is judged by their reports as
// its bytes would be (digest, screen), a commit names it to the replicas instead of carrying its
// bytes, and parts whose units do not match the announcement are dropped and said, as a wrong copy is.
#include <doctest/doctest.h>

#include <string>
#include <tuple>
#include <vector>

#include "core/model/shard_map.hpp"
#include "crosssite/codec/codec.hpp"
#include "crosssite/codec/codec_parts.hpp"
#include "crosssite/codec/delta_digest.hpp"
#include "crosssite/outer/outer_state.hpp"
#include "crosssite/round/delta_store.hpp"
#include "crosssite/round/held_parts.hpp"
#include "tests/support/encoded_values.hpp"
#include "transport/link/sim_link.hpp"

using namespace meridian;

namespace {

const CodecOptions kCodec{CodecKind::Int8, 256};
constexpr std::size_t kValues = 6 * kShardUnit + 500;

// What a site of `ranks` replicas holds of `whole` in parts: the reports put together.
HeldInParts in_parts(const std::vector<std::byte>& whole, int ranks, const std::string& ref) {
  const ShardMap map(kValues, ranks, part_unit(kCodec));
  std::vector<std::vector<std::byte>> reports;
  for (int r = 0; r < ranks; ++r) {
    const auto part = encoded_part(whole, map.part(r).offset, map.part(r).count);
    PartReport report{unit_digests(part), DeltaScreen::Tally(map.part(r).offset)};
    std::vector<float> values(map.part(r).count);
    decode(part, values);
    report.tally.add(values);
    reports.push_back(encode_part_report(report));
  }
  return *held_in_parts(reports, ref);
}

// A store over a link of its own (where bytes it lets go of are handed back).
struct Store {
  ManualClock clock;
  SimNetwork net{clock, 1};
  std::unique_ptr<Link> link = net.open("sim://a/0");
  DeltaStore store{{}, *link};
  CrossSiteEvents events;
  CrossSiteTraffic traffic;
};

}  // namespace

TEST_CASE("a delta held in parts is judged by its reports, and a commit names it to the replicas") {
  Store s;
  DeltaStore& store = s.store;
  auto [events, traffic] = std::tie(s.events, s.traffic);
  const auto whole = testing::encoded(testing::normal_values(kValues, 8, 1e-3), kCodec);
  const Digest digest = delta_digest(std::span<const std::byte>(whole));
  const DeltaKey key{"b", 4};
  store.arrive_in_parts(key, in_parts(whole, 3, "tcp://b#4"));
  CHECK(store.has(key));
  CHECK(store.held(key, digest, events, traffic));
  CHECK(store.verified(key, digest, events, traffic) == nullptr);  // no bytes here
  const DeltaAnnouncement a{"b", 4, 0, 1000, whole.size(), digest, false, 0, 1};
  const auto verdict = store.screen(a, kValues);
  std::vector<float> decoded(kValues);
  decode(whole, decoded);
  CHECK(verdict.ok);
  CHECK(verdict.norm == DeltaScreen().check(decoded, kValues).norm);
  // A sharded state's commit: the delta goes by its name, its bytes stay with the replicas.
  const ShardMap two(kValues, 2, part_unit(kCodec));
  const OuterState state(std::vector<float>(kValues), {}, kCodec, false, {}, two.part(0), two.part(1));
  CommitRecord record{1, {{"b", 4, 0, 1.0, digest}}, 0, "b", {}};
  const auto means = store.mean_of(record, state, {});
  REQUIRE(means.merged.has_value());
  CHECK(means.merged->refs == std::vector<std::string>{"tcp://b#4"});
  CHECK(means.merged->sources ==
        std::vector<std::pair<std::string, std::int64_t>>{{"b", 4}});  // its replicas journal it so
  CHECK(means.merged->encoded == std::vector<std::vector<std::byte>>(1));
  CHECK(events.empty());
  store.drop_in_parts();  // the group re-formed
  CHECK_FALSE(store.has(key));
}

TEST_CASE("parts whose units are not the announced delta's are dropped and said, and asked for again") {
  Store s;
  DeltaStore& store = s.store;
  auto [events, traffic] = std::tie(s.events, s.traffic);
  const auto whole = testing::encoded(testing::normal_values(kValues, 9, 1e-3), kCodec);
  auto other = testing::normal_values(kValues, 9, 1e-3);
  other[5] += 1e-2f;
  const Digest announced = delta_digest(std::span<const std::byte>(testing::encoded(other, kCodec)));
  const DeltaKey key{"b", 5};
  store.arrive_in_parts(key, in_parts(whole, 2, "tcp://b#5"));
  CHECK_FALSE(store.held(key, announced, events, traffic));
  CHECK_FALSE(store.has(key));
  CHECK(traffic.refused.deltas_damaged == 1);
  REQUIRE(events.size() == 1);
  CHECK(events[0].kind == "delta_damaged");
}

TEST_CASE("a missing delta is asked for once it is late, then at most once a second, and at once when overdue") {
  Store s;
  DeltaStore& store = s.store;
  const DeltaKey usual{"b", 3}, overdue{"c", 3};
  // Usually on its way: not at the first look, once a second has passed, not again before the next.
  CHECK_FALSE(store.ask_due(usual, 10.0, 1.0));
  CHECK_FALSE(store.ask_due(usual, 10.9, 1.0));
  CHECK(store.ask_due(usual, 11.0, 1.0));
  CHECK_FALSE(store.ask_due(usual, 11.5, 1.0));
  CHECK(store.ask_due(usual, 12.1, 1.0));
  // Sent to nobody here (merged before this site joined): asked at the first look, then as usual.
  CHECK(store.ask_due(overdue, 10.0, 1.0, true));
  CHECK_FALSE(store.ask_due(overdue, 10.5, 1.0, true));
  CHECK(store.ask_due(overdue, 11.0, 1.0, true));
}
