// A sharded outer state cut anew when a site's group re-forms (sites/replica/outer_cut): replicas
// as threads over Gloo. The first join cuts without a transfer; a dead replica's part comes from
// its predecessor's mirror; a hole falls back to a restarted replica's older whole state, its
// round dropped; with nothing whole, Error(Data).
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint.hpp"
#include "core/model/shard_map.hpp"
#include "core/util/error.hpp"
#include "crosssite/outer/outer_state.hpp"
#include "intrasite/comm/gloo_communicator.hpp"
#include "intrasite/comm/store.hpp"
#include "sites/replica/outer_cut.hpp"
#include "tests/support/ranks.hpp"

using namespace meridian;
using namespace std::chrono_literals;
using meridian::testing::require_no_errors;
using meridian::testing::run_ranks;

namespace {

constexpr std::size_t kValues = 5 * kShardUnit + 300;  // parts differ by a unit, the last is short
const CodecOptions kCodec{CodecKind::Int8, 256};

std::vector<float> initial() {
  std::vector<float> w(kValues);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i % 17) - 0.05f;
  return w;
}

// One replica: its outer state and working weights, and the same rounds on a whole state beside it.
struct Member {
  OuterState state{initial(), {}, kCodec, true};
  std::vector<float> weights = initial();
};

// A round on every member and on `whole`: progress, the delta encoded, a version committed, rebased.
void round(std::vector<Member*> members, OuterState& whole, std::vector<float>& whole_weights, int version) {
  const auto step = [&](std::vector<float>& w) {
    for (std::size_t i = 0; i < w.size(); ++i) w[i] -= 1e-3f * static_cast<float>((i + version) % 5);
  };
  step(whole_weights);
  std::vector<float> mean(kValues);
  decode(whole.encode_delta(whole_weights), mean);
  for (auto* m : members) {
    step(m->weights);
    m->state.encode_delta(m->weights);
    m->state.commit(version, m->state.preview(mean));
    m->state.rebase(m->weights);
  }
  whole.commit(version, whole.preview(mean));
  whole.rebase(whole_weights);
  // Each member rebased its part (and mirror) of the weights as the whole state did; a site's
  // all-gather then gives every member the others' parts.
  for (auto* m : members) {
    const ShardRange p = m->state.part();
    CHECK(std::equal(m->weights.begin() + p.offset, m->weights.begin() + p.end(), whole_weights.begin() + p.offset));
    m->weights = whole_weights;
  }
}

// Cuts on `members.size()` threads, member i as rank i of a new group under `prefix`.
std::vector<OuterCut> cut(MemoryStore& store, const std::string& prefix, std::vector<Member*> members) {
  const int size = static_cast<int>(members.size());
  std::vector<OuterCut> cuts(static_cast<std::size_t>(size));
  const ShardMap map(kValues, size);
  require_no_errors(run_ranks(size, [&](int rank) {
    auto comm = connect_gloo(store, prefix, rank, size, {"127.0.0.1", 10000ms});
    auto& m = *members[static_cast<std::size_t>(rank)];
    cuts[static_cast<std::size_t>(rank)] = cut_outer_state(*comm, m.state, map, m.weights);
  }));
  return cuts;
}

// Member `rank` of a group of `size` holds the whole state's part and the next one's (its round's
// moves aside: an older state taken drops the round, one move more).
void check_holds(const Member& m, const OuterState& whole, int rank, int size) {
  const ShardMap map(kValues, size);
  Checkpoint mine, expected;
  m.state.save(mine);
  OuterState cut_whole = whole;
  Checkpoint records;
  whole.save(records);
  cut_whole.restore(records, map.part(rank), size > 1 ? std::optional(map.part((rank + 1) % size)) : std::nullopt);
  cut_whole.save(expected);
  for (const auto& name : expected.names()) {
    if (name == "outer.moves") continue;
    CAPTURE(name);
    CHECK(std::ranges::equal(mine.get(name), expected.get(name)));
  }
  CHECK(m.state.mirror_part() == cut_whole.mirror_part());
}

// Three replicas cut at the first join, then a round committed on them and on a whole state.
struct AfterOneRound {
  MemoryStore store;
  std::vector<Member> members = std::vector<Member>(3);
  OuterState whole{initial(), {}, kCodec, true};
  std::vector<float> whole_weights = initial();
  AfterOneRound() {
    const std::vector<Member*> all{&members[0], &members[1], &members[2]};
    cut(store, "g0/", all);
    round(all, whole, whole_weights, 1);
  }
};

}  // namespace

TEST_CASE("a group cuts its outer state anew: the first join alone, a dead replica's part from its mirror") {
  MemoryStore store;
  std::vector<Member> members(3);
  OuterState whole(initial(), {}, kCodec, true);
  auto whole_weights = initial();
  std::vector<Member*> all{&members[0], &members[1], &members[2]};
  auto cuts = cut(store, "g0/", all);
  for (int r = 0; r < 3; ++r) {
    CHECK_FALSE(cuts[r].moved);
    CHECK(cuts[r].sources == 1);
    check_holds(members[r], whole, r, 3);
  }
  round(all, whole, whole_weights, 1);
  round(all, whole, whole_weights, 2);
  // Replica 1 dies: 0 and 2 go on as a group of 2, part 1 from replica 0's mirror.
  cuts = cut(store, "g1/", {&members[0], &members[2]});
  CHECK(cuts[0].moved);
  CHECK(cuts[0].mirrors == 1);
  CHECK(cuts[0].version == 2);
  CHECK_FALSE(cuts[0].older);
  check_holds(members[0], whole, 0, 2);
  check_holds(members[2], whole, 1, 2);
  // The same group again: every part in place, nothing moves.
  cuts = cut(store, "g2/", {&members[0], &members[2]});
  CHECK_FALSE(cuts[1].moved);
  round({&members[0], &members[2]}, whole, whole_weights, 3);
  check_holds(members[2], whole, 1, 2);
  CHECK(members[2].weights == whole_weights);
}

TEST_CASE("a hole at the newest version: a restarted replica's older whole state, the round dropped, and nothing whole is Error(Data)") {
  AfterOneRound g;
  auto& [store, members, whole, whole_weights] = g;
  // Replicas 1 and 2 die together: part 2 is gone (its mirror was replica 1's). Alone, replica 0
  // holds no version whole, and says so; its state stays as it was.
  const auto errors = run_ranks(1, [&](int) {
    auto comm = connect_gloo(store, "g1/", 0, 1, {"127.0.0.1", 10000ms});
    cut_outer_state(*comm, members[0].state, ShardMap(kValues, 1), members[0].weights);
  });
  REQUIRE(errors[0]);
  try {
    std::rethrow_exception(errors[0]);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Data);
    CHECK(std::string(e.what()).find("hold no whole outer state of any version") != std::string::npos);
  }
  CHECK(members[0].state.version() == 1);
  // A replica restarted with the whole state of version 0 (its checkpoint's) joins it: the group
  // goes on from that, the in-flight round dropped onto version 0, and catches up across sites.
  Member restarted;
  const OuterState version0(initial(), {}, kCodec, true);
  const auto cuts = cut(store, "g2/", {&members[0], &restarted});
  CHECK(cuts[0].older);
  CHECK(cuts[0].version == 0);
  CHECK(members[0].state.version() == 0);
  check_holds(members[0], version0, 0, 2);
  check_holds(restarted, version0, 1, 2);
  CHECK(members[0].weights == initial());
  CHECK(restarted.weights == initial());
}

// Found by the protocol simulator (a member replica dying alone): a replica restarted from a
// checkpoint of the version the group holds, written before the group's round moved on, held the
// longest part of that version, its whole state, and the group took it: the round's start went
// back, and the round's progress already sent would have been sent again.
TEST_CASE(
    "a replica restarted from a checkpoint of the group's version, older than the group's round, takes the "
    "group's parts") {
  AfterOneRound g;
  auto& [store, members, whole, whole_weights] = g;
  Checkpoint checkpoint;
  whole.save(checkpoint);
  // The round after it is sent, not merged yet: every start moves. Then replica 1 dies.
  for (auto* w : {&whole_weights, &members[0].weights, &members[2].weights})
    for (std::size_t i = 0; i < w->size(); ++i) (*w)[i] -= 2e-3f * static_cast<float>(i % 3);
  for (auto* m : {&members[0], &members[2]}) m->state.encode_delta(m->weights);
  whole.encode_delta(whole_weights);
  Member restarted;
  restarted.state.restore(checkpoint);
  REQUIRE(restarted.state.version() == 1);
  const auto cuts = cut(store, "g1/", {&members[0], &restarted, &members[2]});
  CHECK_FALSE(cuts[0].older);
  CHECK(cuts[0].mirrors == 1);
  check_holds(members[0], whole, 0, 3);
  check_holds(restarted, whole, 1, 3);
  check_holds(members[2], whole, 2, 3);
  for (const Member* m : {&members[0], &restarted, &members[2]}) CHECK(m->state.moves() == whole.moves());
}

TEST_CASE("a re-cut sends each member only its new part and mirror, one source at a time: 4 replicas, one dies") {
  MemoryStore store;
  std::vector<Member> members(4);
  OuterState whole(initial(), {}, kCodec, true);
  auto whole_weights = initial();
  std::vector<Member*> all{&members[0], &members[1], &members[2], &members[3]};
  cut(store, "g0/", all);
  round(all, whole, whole_weights, 1);
  Checkpoint records;
  whole.save(records);
  const double whole_bytes = static_cast<double>(encode_checkpoint(records).size());
  // Replica 2 dies: 0, 1 and 3 go on as a group of 3, part 2 from replica 1's mirror. Each gets
  // about 2/3 of the state's records (its third and the next one's), in pieces from its sources.
  const auto cuts = cut(store, "g1/", {&members[0], &members[1], &members[3]});
  for (int r = 0; r < 3; ++r) {
    CAPTURE(r);
    CHECK(cuts[r].moved);
    CHECK(cuts[r].version == 1);
    CHECK(cuts[r].mirrors == 1);
    CHECK(cuts[r].bytes < 0.8 * whole_bytes);
    CHECK(cuts[r].bytes > 0.5 * whole_bytes);
  }
  check_holds(members[0], whole, 0, 3);
  check_holds(members[1], whole, 1, 3);
  check_holds(members[3], whole, 2, 3);
  round({&members[0], &members[1], &members[3]}, whole, whole_weights, 2);
  check_holds(members[3], whole, 2, 3);
}

TEST_CASE(
    "members that never began a round cut from the initial weights, whatever parts they held: no transfer, and no "
    "hole") {
  // Replicas built with their parts of a group of 4 (as a sharded site's start), of which only 0
  // and 3 came: parts 1 and 2 are nowhere, yet version 0 is every member's initial weights.
  const ShardMap four(kValues, 4);
  const auto built = [&](int id) {
    auto m = std::make_unique<Member>();
    m->state = OuterState(initial(), {}, kCodec, true, {}, four.part(id), four.part((id + 1) % 4));
    return m;
  };
  MemoryStore store;
  auto first = built(0), last = built(3);
  const OuterState version0(initial(), {}, kCodec, true);
  std::vector<OuterCut> cuts(2);
  require_no_errors(run_ranks(2, [&](int rank) {
    auto comm = connect_gloo(store, "fresh/", rank, 2, {"127.0.0.1", 10000ms});
    auto& m = rank == 0 ? *first : *last;
    cuts[static_cast<std::size_t>(rank)] =
        cut_outer_state(*comm, m.state, ShardMap(kValues, 2), m.weights, false, true);
  }));
  for (const auto& c : cuts) {
    CHECK_FALSE(c.moved);
    CHECK(c.bytes == 0);
    CHECK(c.version == 0);
  }
  check_holds(*first, version0, 0, 2);
  check_holds(*last, version0, 1, 2);
  // Not fresh (a member took a step), the same holes are Error(Data).
  auto again = built(0), other = built(3);
  const auto errors = run_ranks(2, [&](int rank) {
    auto comm = connect_gloo(store, "stale/", rank, 2, {"127.0.0.1", 10000ms});
    auto& m = rank == 0 ? *again : *other;
    cut_outer_state(*comm, m.state, ShardMap(kValues, 2), m.weights, false, rank == 0);
  });
  CHECK(errors[0]);
  CHECK(errors[1]);
}
