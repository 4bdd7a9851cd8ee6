// A sharded site's rounds ([parallel] shard_outer) over Gloo, replicas as threads, the other sites
// a fake that commits what a whole state makes of each mean, handing the deltas still encoded (each
// replica takes the mean of its part and its mirror's): the parts' hash matches every commit,
// and a bit flipped in one replica's part of the outer weights (silent data corruption, which no
// other replica holds a copy of to compare) is found by every replica at the next version, before
// anything of that version is applied, and the site takes a peer's state instead; one flipped in a
// replica's mirror of
// another's part is found at the next version too (the mirror's hash against its owner's part's)
// and the mirror cut anew from the owner.
#include <doctest/doctest.h>

#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "core/model/shard_map.hpp"
#include "core/util/error.hpp"
#include "crosssite/round/round_driver.hpp"
#include "intrasite/comm/gloo_communicator.hpp"
#include "intrasite/comm/store.hpp"
#include "sites/replica/group_channel.hpp"
#include "sites/replica/group_parts.hpp"
#include "sites/replica/outer_cut.hpp"
#include "tests/support/fake_training.hpp"
#include "tests/support/ranks.hpp"

using namespace meridian;
using namespace std::chrono_literals;
using meridian::testing::FakeTraining;
using meridian::testing::require_no_errors;
using meridian::testing::run_ranks;

namespace {

constexpr std::size_t kValues = 3 * kShardUnit + 100;
constexpr int kReplicas = 3;
const CodecOptions kCodec{CodecKind::Int8, 256};

std::vector<float> initial() {
  std::vector<float> w(kValues);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i % 13) - 0.05f;
  return w;
}

// What both fakes of the other sites do alike: count this site's rounds, lose none, end never.
struct FakePeers : RoundPeers {
  std::int64_t rounds = 0;
  std::vector<std::int64_t> diverged_at;  // the versions this site's copy did not hash right
  std::optional<std::uint64_t> origin;    // version 0's hash, when the fake says it

  void diverged(std::int64_t version, const std::string&) override { diverged_at.push_back(version); }
  std::optional<std::uint64_t> held_hash(std::int64_t version) const override {
    return version == 0 ? origin : std::nullopt;
  }

  std::int64_t next_round() const override { return rounds; }
  std::size_t chunk_bytes() const override { return 1 << 12; }
  void submit(const DeltaAnnouncement&, std::vector<std::byte>, ChunkHashes) override { ++rounds; }
  std::optional<std::int64_t> lost_round(const OuterState&, std::int64_t) const override { return std::nullopt; }
  bool unmergeable(const OuterState&, std::int64_t) const override { return false; }
  bool disputed() const override { return false; }
  std::int64_t backlog(const OuterState& state) const override { return rounds - state.version(); }
  bool finished(const OuterState&) override { return false; }
  std::int64_t peers_newest_round() const override { return rounds - 1; }
  void stop_announcing() override {}
  void leave() override {}
  bool state_wanted() const override { return false; }
  void state_assembled(std::int64_t, std::vector<std::byte>) override { FAIL("no peer asked for this site's state"); }
};

// The other sites: version after version, each a mean the fake makes up, hashed on a whole state
// as a site holding the whole model would.
struct OtherSites final : FakePeers {
  OuterState whole{initial(), {}, kCodec, false};

  std::optional<VersionCommit> poll_commit(const OuterState& state, std::chrono::milliseconds) override {
    if (!diverged_at.empty() && state.version() < whole.version()) {
      VersionCommit c;  // a peer's state, once this site asked for one
      c.record.number = whole.version();
      c.record.params_hash = OuterState::weights_hash(whole.global());
      c.record.proposer = "b";
      c.snapshot = whole.snapshot();
      return c;
    }
    if (whole.version() >= rounds || state.version() != whole.version()) return std::nullopt;
    // Two sites' deltas, still encoded, as a sharded site's commit carries them.
    VersionCommit c;
    c.fragments = {0};
    c.merged = MergedDeltas{{}, {3.0, 1.0}, 0.75, kValues, {}};
    for (int site = 0; site < 2; ++site) {
      std::vector<float> delta(kValues);
      for (std::size_t i = 0; i < kValues; ++i)
        delta[i] = 1e-3f * static_cast<float>((i + static_cast<std::size_t>(rounds + site)) % 7) - 2e-3f;
      c.merged->encoded.emplace_back(encoded_size(kValues, kCodec));
      encode(delta, kCodec, c.merged->encoded.back());
    }
    std::vector<float> mean(kValues);
    c.merged->mean(0, mean);
    auto outcome = whole.preview(mean);
    c.record.number = whole.version() + 1;
    c.record.params_hash = outcome.hash;
    c.record.proposer = "b";
    whole.commit(c.record.number, std::move(outcome));
    return c;
  }
  std::int64_t newest_commit() const override { return whole.version(); }
  std::optional<ProposalPreview> take_preview() override { return std::nullopt; }
  void previewed(std::uint64_t) override { FAIL("no proposal of this site's is in play"); }
};

// This site proposes version 1 (its replicas preview it), then wins it once the test lets it.
struct Proposing final : FakePeers {
  OuterState whole{initial(), {}, kCodec, false};
  MergedDeltas merged{{}, {1.0, 1.0}, 1.0, kValues, {}};
  bool offered = false;
  std::optional<std::uint64_t> claimed;  // the parts' hash the leader claimed version 1 with
  std::uint64_t hash = 0;                // what version 1 hashes to on a whole state

  Proposing() {
    for (int site = 0; site < 2; ++site) {
      std::vector<float> delta(kValues);
      for (std::size_t i = 0; i < kValues; ++i)
        delta[i] = 1e-3f * static_cast<float>((i + static_cast<std::size_t>(site)) % 9) - 4e-3f;
      merged.encoded.emplace_back(encoded_size(kValues, kCodec));
      encode(delta, kCodec, merged.encoded.back());
    }
    std::vector<float> mean(kValues);
    merged.mean(0, mean);
    hash = whole.preview(mean).hash;
  }
  std::optional<VersionCommit> poll_commit(const OuterState& state, std::chrono::milliseconds) override {
    if (!claimed || state.version() != 0) return std::nullopt;
    VersionCommit c;
    c.fragments = {0};
    c.merged = merged;
    c.record.number = 1;
    c.record.params_hash = hash;
    c.record.proposer = "a";
    c.proposed_here = true;
    return c;
  }
  std::int64_t newest_commit() const override { return claimed ? 1 : 0; }
  std::optional<ProposalPreview> take_preview() override {
    if (offered) return std::nullopt;
    offered = true;
    return ProposalPreview{1, {0}, {}, merged};
  }
  void previewed(std::uint64_t parts_hash) override { claimed = parts_hash; }
};

struct Quiet final : RoundEvents {
  std::vector<int> repaired;  // replicas whose mirrors were found stale
  std::size_t encoded_bytes = 0;  // of its site's deltas, handed to a replica but the leader
  void encoded(std::vector<std::byte> bytes) override { encoded_bytes += bytes.size(); }
  void mirrors_repaired(const std::vector<int>& replicas, std::int64_t, std::size_t) override {
    repaired.insert(repaired.end(), replicas.begin(), replicas.end());
  }
  void submitted(const DeltaAnnouncement&, std::span<const std::byte>) override {}
  void applied(const AppliedVersion&) override {}
  void dropped(std::int64_t, std::int64_t, std::int64_t, int) override {}
  void fast_forwarded(std::int64_t, std::int64_t) override {}
  void caught_up(std::int64_t, std::int64_t, double) override {}
};

// What one replica saw: each version's hash of its weights, the version it ended on, the mirrors
// found stale (the leader), and its part's and its mirror's weights at the end.
struct Seen {
  std::vector<std::uint64_t> hashes;
  std::int64_t version = 0;
  std::vector<int> repaired;
  std::vector<float> part, mirror;
  std::uint64_t received = 0;  // the group channel's payload bytes
  std::size_t encoded = 0;     // Quiet::encoded_bytes
};

// A bit flipped after version `after` in replica `victim`'s outer weights: its own part's, or
// its mirror's of the next replica's part.
struct Fault {
  int victim = -1;
  std::int64_t after = 0;
  bool in_mirror = false;
};

void flip(const OuterState& state) {
  // A hardware fault in the memory of the version's weights.
  auto* at = const_cast<float*>(state.global().data()) + 17;
  std::uint32_t bits;
  std::memcpy(&bits, at, 4);
  bits ^= 1u << 20;
  std::memcpy(at, &bits, 4);
}

// Site a's rounds of one step each, without overlap.
RoundPlan lockstep() {
  RoundPlan plan;
  plan.site = "a";
  plan.total_steps = 1000;
  plan.overlap = false;
  return plan;
}

// `rounds` rounds of one step each, lockstep, on kReplicas replicas of a sharded site.
// `scatter`: each replica gets the deltas' blocks of its part and mirror alone (as a sharded site's
// group channel does), or all of them. `replicas_send`: RoundPlan's (a split exchange).
std::vector<Seen> run(OtherSites& others, int rounds, Fault fault = {},
                      std::vector<std::exception_ptr>* errors = nullptr, bool scatter = true,
                      bool replicas_send = false) {
  MemoryStore store;
  const ShardMap map(kValues, kReplicas);
  std::vector<Seen> seen(kReplicas);
  RoundPlan plan = lockstep();
  plan.replicas_send = replicas_send;
  auto thrown = run_ranks(kReplicas, [&](int rank) {
    auto comm = connect_gloo(store, "g/", rank, kReplicas, {"127.0.0.1", 10000ms});
    OuterState state(initial(), {}, kCodec, false);
    FakeTraining training(initial(), [](std::size_t i, std::int64_t step) {
      return 1e-3f * static_cast<float>((i + static_cast<std::size_t>(step)) % 5);
    });
    cut_outer_state(*comm, state, map, training.w);
    GroupChannel::HeldRanges held;
    if (scatter) held = [&map](int r) { return held_ranges(map, r); };
    GroupChannel channel(*comm, rank == 0, 1, held);
    GroupParts parts(*comm, map);
    Quiet events;
    RoundDriver driver(plan, state, events, [] { return 0.0; });
    if (rank == 0) driver.lead(&others);
    Replica r{channel, training, &parts};
    auto& mine = seen[static_cast<std::size_t>(rank)];
    bool flipped = false;
    for (int i = 0; i < rounds; ++i) {
      training.train();
      driver.after_step(r, training.steps, false, false);
      for (int tries = 0; tries < 20 && driver.attempt(r, 0ms);) ++tries;
      mine.version = state.version();
      mine.hashes.push_back(OuterState::weights_hash(training.w));
      if (rank == fault.victim && state.version() == fault.after && !flipped) {
        if (fault.in_mirror) {
          flip(*state.mirror());
        } else {
          flip(state);
        }
        flipped = true;  // a transient fault: once
      }
    }
    mine.repaired = events.repaired;
    mine.received = channel.received_bytes();
    mine.encoded = events.encoded_bytes;
    mine.part.assign(state.global().begin(), state.global().end());
    mine.mirror.assign(state.mirror()->global().begin(), state.mirror()->global().end());
  });
  if (errors != nullptr) {
    *errors = std::move(thrown);
  } else {
    require_no_errors(thrown);
  }
  return seen;
}

// One replica of site a, untrained, its leader (rank 0) proposing through `peers`.
struct ProposingReplica {
  ProposingReplica(MemoryStore& store, int rank, const RoundPlan& plan, Proposing& peers)
      : comm(connect_gloo(store, "g/", rank, kReplicas, {"127.0.0.1", 10000ms})),
        driver(plan, state, events, [] { return 0.0; }) {
    if (rank == 0) driver.lead(&peers);
  }
  std::unique_ptr<Communicator> comm;
  OuterState state{initial(), {}, kCodec, false};
  FakeTraining training{initial(), [](std::size_t, std::int64_t) { return 0.0f; }};
  Quiet events;
  RoundDriver driver;
};

// This site's proposal of version 1, previewed by every replica on the cut `before`, wins once the
// group holds the cut `after`: what each replica ends on, and the bytes the commit brought it.
struct Won {
  std::vector<std::uint64_t> hashes = std::vector<std::uint64_t>(kReplicas);
  std::vector<std::uint64_t> commit_bytes = std::vector<std::uint64_t>(kReplicas);
};

Won proposal_won(Proposing& peers, const ShardMap& before, const ShardMap& after) {
  RoundPlan plan = lockstep();
  MemoryStore store;
  Won won;
  require_no_errors(run_ranks(kReplicas, [&](int rank) {
    ProposingReplica replica(store, rank, plan, peers);
    auto& [comm, state, training, events, driver] = replica;
    // The group's channel and parts under `map`, for one call of the driver: its bytes received.
    const auto in_group = [&](const ShardMap& map, const auto& call) {
      GroupChannel channel(*comm, rank == 0, 1, [&map](int r) { return held_ranges(map, r); });
      GroupParts parts(*comm, map);
      Replica r{channel, training, &parts};
      call(r);
      return channel.received_bytes();
    };
    const auto attempt = [&](Replica& r) { driver.attempt(r, 0ms); };
    cut_outer_state(*comm, state, before, training.w);
    training.train();
    in_group(before, [&](Replica& r) { driver.after_step(r, training.steps, false, false); });
    in_group(before, attempt);  // the preview: every replica previews version 1 on its part, the leader claims it
    if (&after != &before) cut_outer_state(*comm, state, after, training.w);  // a group re-formed: other parts
    won.commit_bytes[static_cast<std::size_t>(rank)] = in_group(after, attempt);
    CHECK(state.version() == 1);
    CHECK(state.part() == after.part(rank));
    won.hashes[static_cast<std::size_t>(rank)] = OuterState::weights_hash(training.w);
  }));
  // The leader claimed the version with the parts' hash, the whole state's, and every replica agrees.
  REQUIRE(peers.claimed);
  CHECK(*peers.claimed == peers.hash);
  for (const auto h : won.hashes) CHECK(h == won.hashes[0]);
  return won;
}

}  // namespace

TEST_CASE(
    "a sharded site over Gloo: every version's parts hash as the whole state's, and the replicas' weights agree") {
  OtherSites others;
  const auto seen = run(others, 4);
  CHECK(others.whole.version() == 4);
  for (const auto& s : seen) {
    CHECK(s.version == 4);
    CHECK(s.hashes == seen[0].hashes);
  }
  // The weights each version rebased onto are the whole state's (no progress since: exactly it).
  CHECK(seen[0].hashes.back() == OuterState::weights_hash(others.whole.global()));
  // Each replica got the blocks of its part and its mirror's: about 2/3 of the deltas, not all.
  OtherSites others_whole;
  const auto whole = run(others_whole, 4, {}, nullptr, false);
  CHECK(whole[2].hashes == seen[2].hashes);
  for (int rank = 1; rank < kReplicas; ++rank) {
    CAPTURE(rank);
    const auto share = static_cast<double>(seen[static_cast<std::size_t>(rank)].received) /
                       static_cast<double>(whole[static_cast<std::size_t>(rank)].received);
    CHECK(share == doctest::Approx(2.0 / 3).epsilon(0.05));
  }
}

TEST_CASE(
    "this site's proposal wins: each replica commits its preview, and the commit brings it no deltas while the "
    "group holds the cut the preview was taken on") {
  Proposing peers;
  const ShardMap map(kValues, kReplicas);
  const auto won = proposal_won(peers, map, map);
  for (int rank = 0; rank < kReplicas; ++rank) CHECK(won.commit_bytes[static_cast<std::size_t>(rank)] == 0);
}

TEST_CASE("a sharded site's delta is put together at its leader alone, unless every replica sends stripes of it") {
  OtherSites gathered, everywhere;
  const auto at_leader = run(gathered, 3);
  const auto at_all = run(everywhere, 3, {}, nullptr, true, true);
  CHECK(at_all[0].hashes == at_leader[0].hashes);
  const std::size_t delta = encoded_size(kValues, kCodec);
  for (int rank = 1; rank < kReplicas; ++rank) {
    CAPTURE(rank);
    CHECK(at_leader[static_cast<std::size_t>(rank)].encoded == 0);
    CHECK(at_all[static_cast<std::size_t>(rank)].encoded == 3 * delta);
  }
}

TEST_CASE("a group cut anew between its own proposal's preview and the commit previews the commit from its deltas") {
  Proposing peers;
  const ShardMap before(kValues, kReplicas), after(kValues, kReplicas, 2 * kShardUnit);
  REQUIRE(before.part(0) != after.part(0));
  const auto won = proposal_won(peers, before, after);
  // No preview held: the deltas came as for any commit, each replica's blocks of its new cut.
  for (int rank = 1; rank < kReplicas; ++rank)
    CHECK(won.commit_bytes[static_cast<std::size_t>(rank)] == peers.merged.cut(held_ranges(after, rank)).pack().size());
}

TEST_CASE(
    "a bit flipped in one replica's part of the outer weights is found at the next version, and the site takes a "
    "peer's state") {
  OtherSites clean_others, others;
  const auto clean = run(clean_others, 5);
  const auto seen = run(others, 5, {.victim = 1, .after = 2});
  CHECK(others.diverged_at == std::vector<std::int64_t>{3});  // version 3 did not hash right: not applied
  for (int rank = 0; rank < kReplicas; ++rank) {
    CAPTURE(rank);
    const auto i = static_cast<std::size_t>(rank);
    CHECK(seen[i].version == 5);
    CHECK(seen[i].hashes[2] == clean[i].hashes[2]);  // version 3 as a peer's state
    CHECK(seen[i].part == clean[i].part);
    CHECK(seen[i].mirror == clean[i].mirror);
  }
}

TEST_CASE("a part damaged since its version was applied proposes nothing: the leader says so instead of claiming") {
  Proposing peers;
  peers.origin = OuterState::weights_hash(initial());
  const ShardMap map(kValues, kReplicas);
  RoundPlan plan = lockstep();
  MemoryStore store;
  require_no_errors(run_ranks(kReplicas, [&](int rank) {
    ProposingReplica replica(store, rank, plan, peers);
    auto& [comm, state, training, events, driver] = replica;
    GroupChannel channel(*comm, rank == 0, 1, [&map](int r) { return held_ranges(map, r); });
    GroupParts parts(*comm, map);
    Replica r{channel, training, &parts};
    cut_outer_state(*comm, state, map, training.w);
    if (rank == 2) flip(state);  // after version 0 was taken, before the proposal is previewed on it
    training.train();
    driver.after_step(r, training.steps, false, false);
    driver.attempt(r, 0ms);  // every replica previews version 1 and hashes its part of version 0
    CHECK(state.version() == 0);
  }));
  CHECK_FALSE(peers.claimed.has_value());
  CHECK(peers.diverged_at == std::vector<std::int64_t>{0});
}

TEST_CASE(
    "a bit flipped in one replica's mirror is found at the next version, and the parts are cut anew from their "
    "owners") {
  OtherSites clean_others, others;
  const auto clean = run(clean_others, 5);
  const auto seen = run(others, 5, {.victim = 0, .after = 2, .in_mirror = true});
  CHECK(seen[0].repaired == std::vector<int>{0});  // at version 3, on the leader's log
  for (int rank = 0; rank < kReplicas; ++rank) {
    CAPTURE(rank);
    const auto& s = seen[static_cast<std::size_t>(rank)];
    CHECK(s.version == 5);
    CHECK(s.hashes == clean[0].hashes);  // nothing of the fault reached the weights
    CHECK(s.mirror == seen[static_cast<std::size_t>((rank + 1) % kReplicas)].part);
  }
}
