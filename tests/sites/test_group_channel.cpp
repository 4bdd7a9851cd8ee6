// A site's group channel (sites/replica/group_channel): the leader's Update reaches every replica
// over Gloo (replicas as threads). A sharded site's merged deltas are scattered, each replica
// getting the blocks of its part and its mirror's alone; a delta that does not cut goes whole, so
// every replica meets its fault alike; a commit this site proposed goes without its deltas when
// every replica holds its preview, cut otherwise; a whole state's mean is broadcast.
#include <doctest/doctest.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/model/shard_map.hpp"
#include "core/util/error.hpp"
#include "crosssite/codec/codec.hpp"
#include "crosssite/round/held_parts.hpp"
#include "intrasite/comm/gloo_communicator.hpp"
#include "intrasite/comm/store.hpp"
#include "sites/replica/group_channel.hpp"
#include "sites/replica/outer_cut.hpp"
#include "tests/support/ranks.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using namespace std::chrono_literals;
using meridian::testing::require_no_errors;
using meridian::testing::run_ranks;

namespace {

constexpr int kReplicas = 3;
constexpr std::size_t kValues = 4 * kShardUnit + 300;
const CodecOptions kCodec{CodecKind::Int8, 256};

std::vector<std::byte> encoded_delta(int seed) {
  std::vector<float> delta(kValues);
  for (std::size_t i = 0; i < kValues; ++i)
    delta[i] = 1e-3f * static_cast<float>(static_cast<int>((i * 5 + static_cast<std::size_t>(seed)) % 17) - 8);
  std::vector<std::byte> out(encoded_size(kValues, kCodec));
  encode(delta, kCodec, out);
  return out;
}

Update commit_of(MergedDeltas merged) {
  Update u;
  u.kind = Update::Kind::Commit;
  u.version = 7;
  u.params_hash = 42;
  u.fragments = {0};
  u.merged = std::move(merged);
  return u;
}

struct Received {
  Update update;
  std::uint64_t bytes = 0;
};

// The leader's `update` shared by a channel of each of kReplicas ranks; `scatter`: with the
// members' held ranges under `map`; `previewed`: the version each rank holds a preview of.
// `kept`: each rank's parts of the deltas held in parts; `errors`: where the ranks' failures go
// (none: the test fails on one).
// `journal`: the site's journal directory, each rank writing its parts there with a journal of its own.
std::vector<Received> share(const Update& update, const ShardMap& map, bool scatter,
                            std::vector<std::int64_t> previewed = std::vector<std::int64_t>(kReplicas, -1),
                            std::vector<KeptParts>* kept = nullptr, std::vector<std::exception_ptr>* errors = nullptr,
                            const std::filesystem::path* journal = nullptr) {
  MemoryStore store;
  std::vector<Received> got(kReplicas);
  auto thrown = run_ranks(kReplicas, [&](int rank) {
    auto comm = connect_gloo(store, "g/", rank, kReplicas, {"127.0.0.1", 10000ms});
    GroupChannel::HeldRanges held;
    if (scatter) held = [&map](int r) { return held_ranges(map, r); };
    std::optional<FileDeltaJournal> parts;
    if (journal) parts.emplace(*journal);
    GroupChannel channel(*comm, rank == 0, 1, held, kept ? &(*kept)[static_cast<std::size_t>(rank)] : nullptr,
                         parts ? &*parts : nullptr);
    auto& mine = got[static_cast<std::size_t>(rank)];
    if (rank == 0) mine.update = update;
    channel.share(mine.update, previewed[static_cast<std::size_t>(rank)]);
    mine.bytes = channel.received_bytes();
  });
  if (errors)
    *errors = std::move(thrown);
  else
    require_no_errors(thrown);
  return got;
}

// Each replica's part of `delta`, as a peer that cut it on this site's map sent it (transfer 3 from tcp://b).
std::vector<KeptParts> parts_kept(const ShardMap& map, const std::vector<std::byte>& delta) {
  std::vector<KeptParts> kept(kReplicas);
  for (int r = 0; r < kReplicas; ++r) {
    kept[static_cast<std::size_t>(r)].reform(r, map);
    const auto bytes = make_part_stripe(3, 1, cut_part_on(delta, r, kReplicas, kShardUnit), r, kReplicas);
    REQUIRE(kept[static_cast<std::size_t>(r)].keep("tcp://b", read_stripe(bytes)).has_value());
  }
  return kept;
}

// `whole` with its second delta (site b's round 4) held in parts: named, no bytes.
MergedDeltas second_in_parts(const MergedDeltas& whole) {
  MergedDeltas named = whole;
  named.encoded[1].clear();
  named.refs = {"", parts_ref("tcp://b", 3)};
  named.sources = {{"a", 5}, {"b", 4}};
  return named;
}

}  // namespace

TEST_CASE(
    "a sharded site's merged deltas: each replica gets its part's and its mirror's blocks, the leader keeps all") {
  const ShardMap map(kValues, kReplicas);
  const MergedDeltas merged{{encoded_delta(1), encoded_delta(2)}, {2.0, 1.0}, 0.9, kValues, {}};
  const auto got = share(commit_of(merged), map, true);
  CHECK(got[0].update.merged == merged);
  CHECK(got[0].bytes == 0);
  for (int rank = 1; rank < kReplicas; ++rank) {
    CAPTURE(rank);
    const auto& u = got[static_cast<std::size_t>(rank)];
    CHECK(u.update.kind == Update::Kind::Commit);
    CHECK(u.update.version == 7);
    CHECK(u.update.params_hash == 42);
    CHECK(u.update.fragments == std::vector<int>{0});
    REQUIRE(u.update.merged);
    CHECK(*u.update.merged == merged.cut(held_ranges(map, rank)));
    CHECK(u.bytes == u.update.merged->pack().size());
    CHECK(u.bytes < merged.pack().size());
  }
}

TEST_CASE("a delta held in parts: each replica fills in its part and the next one's, and holds what a scatter gives") {
  const ShardMap map(kValues, kReplicas);
  const MergedDeltas whole{{encoded_delta(1), encoded_delta(2)}, {2.0, 1.0}, 0.9, kValues, {}};
  const MergedDeltas named = second_in_parts(whole);
  const auto kept_parts = [&] { return parts_kept(map, whole.encoded[1]); };
  auto kept = kept_parts();
  const testing::TempDir dir("channel-journal");
  const auto journal = dir / "delta-journal";
  const auto got =
      share(commit_of(named), map, true, std::vector<std::int64_t>(kReplicas, -1), &kept, nullptr, &journal);
  for (int r = 0; r < kReplicas; ++r) {
    CAPTURE(r);
    REQUIRE(got[static_cast<std::size_t>(r)].update.merged.has_value());
    CHECK(*got[static_cast<std::size_t>(r)].update.merged == whole.cut(held_ranges(map, r)));
    CHECK(kept[static_cast<std::size_t>(r)].part(parts_ref("tcp://b", 3)) == nullptr);  // merged: let go
  }
  // Each replica journalled its part before the apply: a restart reads the delta back whole.
  CHECK(FileDeltaJournal(journal).read({"b", 4}) == whole.encoded[1]);
  CHECK(FileDeltaJournal(journal).load().size() == 1);
  // A replica that no longer keeps its part: every replica fails alike, none waits, and each says
  // why (PartsNotKept: its site catches up without a regroup; an Error(Peer) to anyone else).
  kept = kept_parts();
  kept[1].forget(parts_ref("tcp://b", 3));
  std::vector<std::exception_ptr> errors;
  share(commit_of(named), map, true, std::vector<std::int64_t>(kReplicas, -1), &kept, &errors);
  REQUIRE(errors.size() == kReplicas);
  for (const auto& e : errors) {
    REQUIRE(e != nullptr);
    CHECK_THROWS_AS(std::rethrow_exception(e), PartsNotKept);
    try {
      std::rethrow_exception(e);
    } catch (const Error& error) {
      CHECK(error.kind() == ErrorKind::Peer);
    }
  }
}

TEST_CASE("a preview keeps the parts it was filled in from, and the commit every replica previewed lets them go") {
  const ShardMap map(kValues, kReplicas);
  const MergedDeltas whole{{encoded_delta(1), encoded_delta(2)}, {1.0, 1.0}, 1.0, kValues, {}};
  const MergedDeltas named = second_in_parts(whole);
  auto kept = parts_kept(map, whole.encoded[1]);
  auto preview = commit_of(named);
  preview.kind = Update::Kind::Preview;
  const auto got = share(preview, map, true, std::vector<std::int64_t>(kReplicas, -1), &kept);
  for (int r = 0; r < kReplicas; ++r) {
    CAPTURE(r);
    CHECK(*got[static_cast<std::size_t>(r)].update.merged == whole.cut(held_ranges(map, r)));
    CHECK(kept[static_cast<std::size_t>(r)].part(parts_ref("tcp://b", 3)) != nullptr);  // its commit may need them
  }
  auto proposed = commit_of(named);
  proposed.proposed_here = true;
  share(proposed, map, true, {7, 7, 7}, &kept);
  for (const auto& k : kept) CHECK(k.part(parts_ref("tcp://b", 3)) == nullptr);
}

TEST_CASE("a merged delta that does not cut goes whole to every replica, which all meet its fault alike") {
  const ShardMap map(kValues, kReplicas);
  MergedDeltas merged{{encoded_delta(1), {std::byte{7}, std::byte{1}, std::byte{0}}}, {1.0, 1.0}, 1.0, kValues, {}};
  const auto got = share(commit_of(merged), map, true);
  for (int rank = 0; rank < kReplicas; ++rank) {
    CAPTURE(rank);
    const auto& u = got[static_cast<std::size_t>(rank)].update;
    REQUIRE(u.merged);
    CHECK(*u.merged == merged);
    std::vector<float> mean(16);
    CHECK_THROWS_AS(u.merged->mean(map.part(rank).offset, mean), Error);
  }
}

TEST_CASE("a whole state's update: the mean reaches every replica as the leader sent it") {
  const ShardMap map(kValues, kReplicas);
  Update update;
  update.kind = Update::Kind::Commit;
  update.version = 3;
  update.fragments = {0};
  for (std::size_t i = 0; i < 1000; ++i) update.mean.push_back(1e-3f * static_cast<float>(i % 7));
  const auto got = share(update, map, false);
  for (int rank = 1; rank < kReplicas; ++rank) {
    CAPTURE(rank);
    CHECK(got[static_cast<std::size_t>(rank)].update.mean == update.mean);
    CHECK(!got[static_cast<std::size_t>(rank)].update.merged);
    CHECK(got[static_cast<std::size_t>(rank)].bytes == 1000 * sizeof(float));
  }
}

TEST_CASE("a commit this site proposed: no deltas when every replica previewed it, each its cut when one did not") {
  const ShardMap map(kValues, kReplicas);
  const MergedDeltas merged{{encoded_delta(1), encoded_delta(2)}, {1.0, 1.0}, 1.0, kValues, {}};
  auto proposed = commit_of(merged);
  proposed.proposed_here = true;
  SUBCASE("every replica holds its preview") {
    const auto got = share(proposed, map, true, {7, 7, 7});
    for (int rank = 1; rank < kReplicas; ++rank) {
      CAPTURE(rank);
      const auto& u = got[static_cast<std::size_t>(rank)];
      CHECK(u.update.kind == Update::Kind::Commit);
      CHECK(u.update.proposed_here);
      CHECK(u.update.params_hash == 42);
      CHECK(!u.update.merged);
      CHECK(u.update.mean.empty());
      CHECK(u.bytes == 0);
    }
  }
  SUBCASE("one replica's preview is of another version, or it has none") {
    for (const auto& previewed : {std::vector<std::int64_t>{7, 6, 7}, std::vector<std::int64_t>{7, 7, -1}}) {
      const auto got = share(proposed, map, true, previewed);
      for (int rank = 1; rank < kReplicas; ++rank) {
        CAPTURE(rank);
        const auto& u = got[static_cast<std::size_t>(rank)];
        REQUIRE(u.update.merged);
        CHECK(*u.update.merged == merged.cut(held_ranges(map, rank)));
        CHECK(u.bytes == merged.cut(held_ranges(map, rank)).pack().size());
      }
    }
  }
  SUBCASE("one replica lacks its preview and a delta does not cut: the deltas whole to every replica") {
    auto broken = proposed;
    broken.merged->encoded[1] = {std::byte{7}, std::byte{1}, std::byte{0}};
    const auto got = share(broken, map, true, {7, 7, -1});
    for (int rank = 1; rank < kReplicas; ++rank) {
      CAPTURE(rank);
      REQUIRE(got[static_cast<std::size_t>(rank)].update.merged);
      CHECK(*got[static_cast<std::size_t>(rank)].update.merged == *broken.merged);
    }
  }
  SUBCASE("the leader's own preview is not good: the deltas are cut as for any commit") {
    const auto got = share(proposed, map, true, {-1, 7, 7});
    for (int rank = 1; rank < kReplicas; ++rank) {
      CAPTURE(rank);
      REQUIRE(got[static_cast<std::size_t>(rank)].update.merged);
      CHECK(*got[static_cast<std::size_t>(rank)].update.merged == merged.cut(held_ranges(map, rank)));
    }
  }
}
