// Proposing a version and what it applies (crosssite/round/proposer.hpp), on an in-memory control
// plane: when it is due, what the claimed record says, and that the mean handed out is the same
// bits whether this site's proposal won (kept) or another's did (computed).
#include <doctest/doctest.h>

#include "core/util/digest.hpp"
#include "crosssite/codec/delta_digest.hpp"
#include "crosssite/control/memory_control_plane.hpp"
#include "crosssite/round/proposer.hpp"
#include "transport/link/sim_link.hpp"

namespace meridian {
namespace {

const std::vector<float> kInitial{1.0f, 2.0f, 3.0f, 4.0f};

// One site's side: its control-plane client, commit log, delta store and proposer.
struct Side {
  Side(const std::string& site, MemoryStore& store, ManualClock& clock, SimNetwork& net)
      : plane(store, clock, 1),
        link(net.open(site)),
        deltas(DeltaStoreOptions{}, *link),
        proposer(ProposerOptions{site, {}, {}}, log, deltas, counts) {}
  MemoryControlPlane plane;
  std::unique_ptr<Link> link;
  CommitLog log{"job", 1};
  DeltaStore deltas;
  CrossSiteTraffic counts;
  Proposer proposer;
  CrossSiteEvents events;
};

OuterState fresh_state() { return OuterState(kInitial, OuterOptions{}, CodecOptions{CodecKind::Fp32}, false); }

// Site `site`'s round-1 delta: its weights moved by `step` from version 0.
std::pair<DeltaAnnouncement, std::vector<std::byte>> delta_of(const std::string& site, float step) {
  OuterState own = fresh_state();
  std::vector<float> local = kInitial;
  for (auto& x : local) x -= step;
  auto bytes = own.encode_delta(local);
  return {
      DeltaAnnouncement{site, 1, 0, 1000, bytes.size(), delta_digest(std::span<const std::byte>(bytes)), false, 0, 1},
      bytes};
}

// What the rule sees at version 0 with both sites live and both rounds announced.
CommitView view_at(double now) {
  CommitView view;
  view.now = now;
  view.live_sites = {"a", "b"};
  view.announced = {delta_of("a", 0.5f).first, delta_of("b", 1.5f).first};
  return view;
}

// Puts both deltas in `side`'s store, verified as a commit's would be.
void hold_both(Side& side) {
  for (const auto& [a, bytes] : {delta_of("a", 0.5f), delta_of("b", 1.5f)}) {
    side.deltas.put({a.site, a.round}, bytes);
    REQUIRE(side.deltas.verified({a.site, a.round}, a.digest, side.events, side.counts) != nullptr);
  }
}

// Site a alone on its control plane and network, holding both deltas, at version 0.
struct OneSite {
  OneSite() { hold_both(a); }
  ManualClock clock;
  MemoryStore store{clock};
  SimNetwork net{clock, 1};
  Side a{"a", store, clock, net};
  const OuterState state = fresh_state();
};

// What the rule sees at `now` once `side` holds both deltas.
CommitView both_held(Side& side, double now) {
  CommitView view = view_at(now);
  side.proposer.held(view, {"a", 1});
  side.proposer.held(view, {"b", 1});
  return view;
}

}  // namespace

TEST_CASE(
    "proposer: waits for every live site's delta, then claims the version with what it merges and the state it leads "
    "to") {
  OneSite one;
  Side& a = one.a;
  const OuterState& state = one.state;

  CommitView only_own = view_at(10);
  a.proposer.held(only_own, {"a", 1});
  const auto waiting = a.proposer.propose(only_own, state, {}, a.plane, a.events);
  REQUIRE(waiting);
  CHECK(waiting->what == Waiting::What::DeltasForVersion);
  CHECK(waiting->number == 1);
  CHECK(waiting->describe() == "deltas for version 1 (1 here, 2 live sites)");
  CHECK(a.counts.commits_proposed == 0);

  CHECK_FALSE(a.proposer.propose(both_held(a, 11), state, {{"a", 0}}, a.plane, a.events));
  CHECK(a.counts.commits_proposed == 1);
  CHECK(a.counts.commits_won == 1);
  a.log.read(a.plane, a.events);
  const CommitRecord* record = a.log.find(1);
  REQUIRE(record != nullptr);
  CHECK(record->proposer == "a");
  REQUIRE(record->entries.size() == 2);
  CHECK(record->merged == std::map<std::string, std::int64_t>{{"a", 1}, {"b", 1}});
  const VersionCommit commit = a.proposer.commit_of(*record, state);
  // Both deltas weigh alike: the mean moved every weight by (0.5 + 1.5) / 2.
  CHECK(commit.mean_delta == std::vector<float>{1.0f, 1.0f, 1.0f, 1.0f});
  CHECK(record->params_hash == state.preview(commit.fragments, commit.mean_delta).hash);
}

TEST_CASE(
    "proposer: the version hands out the same bits on the winner, a site whose proposal lost, and one that proposed "
    "nothing") {
  ManualClock clock;
  MemoryStore store(clock);
  SimNetwork net(clock, 1);
  Side a("a", store, clock, net), b("b", store, clock, net), c("c", store, clock, net);
  const OuterState state = fresh_state();
  for (Side* side : {&a, &b, &c}) hold_both(*side);
  for (Side* side : {&a, &b}) {
    CommitView view = view_at(10);
    side->proposer.held(view, {"a", 1});
    side->proposer.held(view, {"b", 1});
    CHECK_FALSE(side->proposer.propose(view, state, {}, side->plane, side->events));
  }
  CHECK(a.counts.commits_won == 1);  // the compare-and-swap lets one win: the first
  CHECK(b.counts.commits_proposed == 1);
  CHECK(b.counts.commits_won == 0);
  std::vector<VersionCommit> commits;
  for (Side* side : {&a, &b, &c}) {
    side->log.read(side->plane, side->events);
    const CommitRecord* record = side->log.find(1);
    REQUIRE(record != nullptr);
    CHECK(record->proposer == "a");
    commits.push_back(side->proposer.commit_of(*record, state));
  }
  for (const VersionCommit& commit : commits) {
    CHECK(commit.mean_delta == commits[0].mean_delta);
    CHECK(commit.fragments == commits[0].fragments);
  }
  CHECK(commits[0].mean_delta == std::vector<float>{1.0f, 1.0f, 1.0f, 1.0f});
}

TEST_CASE("proposer: a whole state that no longer hashes as its version's record says proposes nothing") {
  OneSite one;
  Side& a = one.a;
  const OuterState& state = one.state;
  const CommitView both = both_held(a, 11);
  const std::uint64_t held = OuterState::weights_hash(kInitial);
  const HeldCopy other("a", held ^ 1), same("a", held);  // version 0 named otherwise, and as it is
  const auto damaged = a.proposer.propose(both, state, {}, a.plane, a.events, &other);
  REQUIRE(damaged);
  CHECK(damaged->what == Waiting::What::CopyDiverged);
  CHECK(damaged->number == 0);
  CHECK(damaged->detail == "site a: its copy of version 0 hashes to " + std::to_string(held) + ", its record says " +
                               std::to_string(held ^ 1));
  CHECK(a.counts.commits_proposed == 0);
  CHECK_FALSE(one.store.get(RoundKeys("job").commit(1)).has_value());
  // The copy as its record says: the proposal goes out.
  CHECK_FALSE(a.proposer.propose(both, state, {}, a.plane, a.events, &same));
  CHECK(a.counts.commits_proposed == 1);
}

}  // namespace meridian
