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

// Member `rank` of a group of `size` holds the whole state's part and the next one's.
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
    CAPTURE(name);
    CHECK(std::ranges::equal(mine.get(name), expected.get(name)));
  }
  CHECK(m.state.mirror_part() == cut_whole.mirror_part());
}

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
  MemoryStore store;
  std::vector<Member> members(3);
  OuterState whole(initial(), {}, kCodec, true);
  auto whole_weights = initial();
  std::vector<Member*> all{&members[0], &members[1], &members[2]};
  cut(store, "g0/", all);
  round(all, whole, whole_weights, 1);
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
