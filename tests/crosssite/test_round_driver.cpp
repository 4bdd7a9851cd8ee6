// RoundDriver with fakes for the other sites, the replicas' channel and the training: a leader and
// a member replica run in one thread, the member taking each Update the leader shared.
#include <doctest/doctest.h>

#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "crosssite/round/round_driver.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/fake_training.hpp"

using namespace meridian;
using namespace std::chrono_literals;
using meridian::testing::FakeTraining;

namespace {

constexpr std::size_t kParams = 64;

std::vector<float> initial() {
  std::vector<float> w(kParams);
  for (std::size_t i = 0; i < kParams; ++i) w[i] = 0.1f * static_cast<float>(i % 7);
  return w;
}

FragmentPlan plan_of(int fragments) {
  FragmentPlan plan;
  const std::size_t each = kParams / static_cast<std::size_t>(fragments);
  for (int f = 0; f < fragments; ++f)
    plan.push_back(Fragment{{FragmentRange{static_cast<std::size_t>(f) * each, each}}, {"t" + std::to_string(f)}, each});
  return plan;
}

// The other sites, as the leader sees them: commits handed out in turn, the rest as set.
struct FakePeers final : RoundPeers {
  std::deque<std::vector<int>> commits;  // fragments of each version to come (a mean of 0.01s)
  std::optional<std::int64_t> lost, refused;
  std::int64_t backlog_count = 0, newest = 0, peers_round = -1;
  bool all_finished = false, left = false, announcing = true;
  bool own_proposal = false;  // the commits handed out are this site's winning proposals
  bool wrong_hash = false;    // the next commit's record says another hash than its deltas make
  std::vector<DeltaAnnouncement> submitted;
  std::vector<std::pair<std::int64_t, std::string>> diverged_at;  // what the site said of its copy
  std::optional<VersionCommit> state;                             // a peer's state, handed out first

  std::int64_t next_round() const override { return static_cast<std::int64_t>(submitted.size()); }
  std::size_t chunk_bytes() const override { return 1 << 10; }
  void submit(const DeltaAnnouncement& a, std::vector<std::byte>, ChunkHashes) override {
    submitted.push_back(a);
    ++backlog_count;
  }
  std::optional<VersionCommit> poll_commit(const OuterState& state, std::chrono::milliseconds) override {
    if (this->state) return std::exchange(this->state, std::nullopt);
    if (commits.empty()) return std::nullopt;
    VersionCommit c;
    c.fragments = commits.front();
    commits.pop_front();
    std::size_t values = 0;
    for (const int f : c.fragments) values += state.fragment(f).size;
    c.mean_delta.assign(values, 0.01f);
    c.record.number = state.version() + 1;
    // This site's own proposal is previewed on its state (Proposer::propose); another site's on theirs.
    const OuterState theirs = state;
    auto outcome = (own_proposal ? state : theirs).preview(c.fragments, c.mean_delta);
    c.record.params_hash = outcome.hash ^ (std::exchange(wrong_hash, false) ? 1 : 0);
    if (own_proposal) c.outcome = std::move(outcome);
    c.record.proposer = "b";
    backlog_count = std::max<std::int64_t>(0, backlog_count - 1);
    return c;
  }
  std::optional<std::int64_t> lost_round(const OuterState&, std::int64_t after) const override {
    return lost && *lost > after ? lost : std::nullopt;
  }
  bool unmergeable(const OuterState&, std::int64_t round) const override { return refused && *refused == round; }
  bool disputed() const override { return false; }
  void diverged(std::int64_t version, const std::string& why) override { diverged_at.emplace_back(version, why); }
  std::optional<std::uint64_t> held_hash(std::int64_t) const override { return std::nullopt; }
  std::int64_t backlog(const OuterState&) const override { return backlog_count; }
  bool finished(const OuterState&) override { return all_finished && commits.empty(); }
  std::int64_t newest_commit() const override { return newest; }
  std::int64_t peers_newest_round() const override { return peers_round; }
  void leave() override { left = true; }
  void stop_announcing() override { announcing = false; }
  // Whole states only here: a sharded site's replicas preview and assemble together (test_site_exchange).
  std::optional<ProposalPreview> take_preview() override { return std::nullopt; }
  void previewed(std::uint64_t) override { FAIL("a whole state's proposal is hashed by its proposer"); }
  bool state_wanted() const override { return false; }
  void state_assembled(std::int64_t, std::vector<std::byte>) override { FAIL("a whole state serves its own snapshot"); }
};

// One collective per call in the count: the header, then the payload of a commit or state.
struct Wire {
  Update last;
  int collectives = 0;
};

struct FakeChannel final : ReplicaChannel {
  FakeChannel(Wire& wire, bool leader) : wire(wire), is_leader(leader) {}
  bool leader() const override { return is_leader; }
  void share(Update& u, std::int64_t) override {
    if (is_leader) {
      wire.last = u;
      wire.collectives += 1 + (u.kind == Update::Kind::Commit || u.kind == Update::Kind::Snapshot);
    } else {
      u = wire.last;
    }
  }
  Wire& wire;
  bool is_leader;
};

struct Log final : RoundEvents {
  std::vector<std::string> said;
  void submitted(const DeltaAnnouncement& a, std::span<const std::byte>) override {
    said.push_back("sent " + std::to_string(a.round) + " f" + std::to_string(a.fragment));
  }
  void applied(const AppliedVersion& v) override { said.push_back("applied " + std::to_string(v.version)); }
  void dropped(std::int64_t round, std::int64_t, std::int64_t, int) override { said.push_back("dropped " + std::to_string(round)); }
  void fast_forwarded(std::int64_t, std::int64_t step) override { said.push_back("step " + std::to_string(step)); }
  void caught_up(std::int64_t, std::int64_t version, double) override { said.push_back("caught up " + std::to_string(version)); }
};

// Every step takes 0.001 off every weight.
float uniform(std::size_t, std::int64_t) { return 0.001f; }

// A site of two replicas: each with its OuterState, training and driver; the leader has the peers.
struct Site {
  explicit Site(RoundPlan plan, int fragments = 1)
      : leader_state(initial(), {}, CodecOptions{CodecKind::Fp32}, false, plan_of(fragments)),
        member_state(initial(), {}, CodecOptions{CodecKind::Fp32}, false, plan_of(fragments)),
        leader(plan, leader_state, log, [this] { return now; }),
        member(plan, member_state, member_log, [this] { return now; }) {
    leader.lead(&peers);
  }
  // Both replicas train one step, then run the round until neither waits (at most `attempts`).
  void step(bool last = false, bool hold = false, int attempts = 50) {
    lead_training.train();
    member_training.train();
    Replica l{lead_channel, lead_training}, m{member_channel, member_training};
    leader.after_step(l, lead_training.steps, last, hold);
    member.after_step(m, member_training.steps, last, hold);
    settle(attempts);
  }
  void settle(int attempts = 50) {
    Replica l{lead_channel, lead_training}, m{member_channel, member_training};
    for (int i = 0; i < attempts && leader.waiting(); ++i) {
      const bool lw = leader.attempt(l, 0ms);
      const bool mw = member.attempt(m, 0ms);
      REQUIRE(lw == mw);
      now += 0.1;
    }
  }
  void same_everywhere() {
    CHECK(leader_state.version() == member_state.version());
    CHECK(OuterState::weights_hash(leader_state.global()) == OuterState::weights_hash(member_state.global()));
    CHECK(lead_training.w == member_training.w);
    CHECK(lead_training.steps == member_training.steps);
  }

  double now = 1;
  FakePeers peers;
  Log log, member_log;
  Wire wire;
  FakeChannel lead_channel{wire, true}, member_channel{wire, false};
  FakeTraining lead_training{initial(), uniform}, member_training{initial(), uniform};
  OuterState leader_state, member_state;
  RoundDriver leader, member;
};

RoundPlan plan(int inner_steps, bool overlap = true, int total = 100) {
  RoundPlan p;
  p.site = "a";
  p.inner_steps = inner_steps;
  p.job_round_steps = inner_steps;
  p.total_steps = total;
  p.overlap = overlap;
  p.overlap_steps = inner_steps;
  return p;
}

}  // namespace

TEST_CASE("shorter early rounds: rounds end every early_inner_steps until early_steps, then every inner_steps") {
  RoundPlan p = plan(10, true, 57);
  p.early_inner_steps = 4;
  p.early_steps = 12;
  std::vector<std::int64_t> ends;
  for (std::int64_t done = 1; done <= p.total_steps; ++done)
    if (p.round_ends(done)) ends.push_back(done);
  CHECK(ends == std::vector<std::int64_t>{4, 8, 12, 22, 32, 42, 52, 57});
  CHECK(p.steps_into_round(5) == 1);
  CHECK(p.steps_into_round(12) == 4);
  CHECK(p.steps_into_round(13) == 1);
  CHECK(p.steps_into_round(22) == 10);
  CHECK(p.steps_into_round(57) == 5);  // the last round, cut short by the job's end
  for (const std::int64_t round : {0, 1, 2, 3, 4})
    CHECK(p.round_start(round) == std::vector<std::int64_t>{0, 4, 8, 12, 22}[round]);
  // Without early rounds: every H, as before.
  const RoundPlan q = plan(10, true, 25);
  CHECK((q.round_ends(10) && q.round_ends(20) && q.round_ends(25) && !q.round_ends(12)));
  CHECK((q.steps_into_round(13) == 3 && q.round_start(3) == 30));
}

TEST_CASE(
    "shorter early rounds: a site sends each round's tokens at its end, and one that takes up the job starts where its "
    "round does") {
  RoundPlan p = plan(6, true, 30);
  p.early_inner_steps = 2;
  p.early_steps = 4;
  Site site(p);
  for (int s = 0; s < 10; ++s) {
    site.step();
    site.peers.commits.push_back({0});
    site.settle();
  }
  REQUIRE(site.peers.submitted.size() == 3);  // at steps 2, 4 and 10
  CHECK(site.peers.submitted[0].tokens == 200);
  CHECK(site.peers.submitted[1].tokens == 200);
  CHECK(site.peers.submitted[2].tokens == 600);
  site.same_everywhere();

  Site late(p);
  late.peers.peers_round = 3;  // the others announced rounds 0 to 3: round 4 starts at step 4 + 2 x 6
  late.leader.take_up_job();
  late.member.take_up_job();
  late.settle();
  CHECK(late.lead_training.steps == 16);
  late.same_everywhere();
}

TEST_CASE("a commit costs two collectives, a look with nothing one, and every replica ends on the same bits") {
  Site site(plan(4));
  for (int s = 0; s < 4; ++s) site.step();
  REQUIRE(site.peers.submitted.size() == 1);
  CHECK(site.peers.submitted[0].tokens == 400);
  site.peers.commits.push_back({0});
  const int before = site.wire.collectives;
  site.step();  // a poll: the commit is there
  CHECK(site.wire.collectives - before == 2);
  CHECK(site.leader_state.version() == 1);
  site.same_everywhere();
  const int after = site.wire.collectives;
  site.step();  // a poll: nothing
  CHECK(site.wire.collectives - after == 1);
  site.same_everywhere();
}

TEST_CASE("without overlap a round's end waits for the next version, whose commit rebases the round") {
  Site site(plan(2, false));
  site.step();
  CHECK(site.wire.collectives == 0);  // mid-round and no overlap: no look at all
  site.peers.commits.push_back({0});
  site.step();
  CHECK(site.peers.submitted.size() == 1);
  CHECK(site.leader_state.version() == 1);
  CHECK(!site.leader.waiting());
  site.same_everywhere();
  // The round's progress since its start stays on top of the new version.
  CHECK(site.lead_training.w == std::vector<float>(site.leader_state.global().begin(), site.leader_state.global().end()));
}

TEST_CASE("overlap: a second unmerged round holds the site until one is merged") {
  Site site(plan(2));
  site.step();
  site.step();  // round 0 sent: one unmerged round, the site trains on
  CHECK(!site.leader.waiting());
  site.step();
  site.step(false, false, 3);  // round 1 sent, two unmerged: it waits
  CHECK(site.leader.waiting());
  site.peers.commits.push_back({0});
  site.settle();
  CHECK(!site.leader.waiting());
  CHECK(site.leader_state.version() == 1);
  site.same_everywhere();
}

TEST_CASE("streaming: each exchange sends the fragment due, the last sends every fragment one after another") {
  Site site(plan(2, true, 8), 4);
  for (int s = 0; s < 6; ++s) {
    site.step();
    if (site.leader.waiting()) {
      site.peers.commits.push_back({static_cast<int>(site.peers.submitted.size() - 1) % 4});
      site.settle();
    }
  }
  REQUIRE(site.peers.submitted.size() == 3);
  CHECK(site.peers.submitted[0].fragment == 0);
  CHECK(site.peers.submitted[1].fragment == 1);
  CHECK(site.peers.submitted[2].fragment == 2);
  site.step();
  site.peers.all_finished = false;
  // The last step: fragment 3 is due, then 0, 1 and 2, each once the backlog allows it.
  site.peers.backlog_count = 0;
  site.step(true, false, 3);
  for (int i = 0; i < 10 && site.leader.waiting(); ++i) {
    site.peers.commits.push_back({site.peers.submitted.back().fragment});
    site.settle(3);
  }
  site.peers.all_finished = true;
  site.settle();
  CHECK(!site.leader.waiting());
  REQUIRE(site.peers.submitted.size() == 7);
  CHECK(site.peers.submitted[3].fragment == 3);
  CHECK(site.peers.submitted[4].fragment == 0);
  CHECK(site.peers.submitted[6].fragment == 2);
  CHECK(site.peers.submitted[6].final);
  CHECK_FALSE(site.peers.submitted[5].final);
  site.same_everywhere();
}

TEST_CASE("streaming: a site sends the fragment whose turn its round's version is, whatever its step") {
  // Joined late: it catches up to version 5 at step 0; version 6 is fragment 5 mod 4 = 1's turn.
  Site site(plan(2, false, 40), 4);
  site.peers.newest = 5;
  site.peers.commits = {{0}, {1}, {2}, {3}, {0}};
  site.leader.catch_up();
  site.member.catch_up();
  site.settle();
  REQUIRE(site.leader_state.version() == 5);
  site.step();
  site.step();
  REQUIRE(site.peers.submitted.size() == 1);
  CHECK(site.peers.submitted[0].fragment == 1);
  // Its round refused and dropped: the next round aims at version 6 again, not 7.
  site.peers.refused = 0;
  site.settle();
  CHECK(site.log.said.back() == "dropped 0");
  site.step();
  site.step();
  REQUIRE(site.peers.submitted.size() == 2);
  CHECK(site.peers.submitted[1].fragment == 1);
  site.peers.commits.push_back({1});
  site.settle();
  CHECK(site.leader_state.version() == 6);
  site.step();
  site.step();
  CHECK(site.peers.submitted.back().fragment == 2);
  site.same_everywhere();
}

TEST_CASE(
    "streaming in lockstep: a refused round of the next version's fragment is dropped even when a newer one waits, and "
    "another is sent") {
  Site site(plan(2, false, 40), 2);
  const auto round = [&] {
    site.step();
    site.step();
    return site.peers.submitted.back().fragment;
  };
  CHECK(round() == 0);  // round 0, for version 1
  site.peers.commits.push_back({0});
  site.settle();
  CHECK(round() == 1);  // round 1, for version 2
  // The site's copy of version 1 comes again whole (rebuilt from its disk): a version came, the
  // wait is over, and round 2 is sent on version 1 as well, for version 3.
  VersionCommit copy;
  copy.record.number = 1;
  copy.record.params_hash = OuterState::weights_hash(site.leader_state.global());
  copy.record.proposer = "a";
  copy.snapshot = site.leader_state.snapshot();
  site.peers.state = std::move(copy);
  site.settle();
  CHECK(round() == 0);
  site.peers.commits.push_back({1});
  site.settle();
  REQUIRE(site.leader_state.version() == 2);
  CHECK(round() == 1);  // round 3, for version 4: version 3 is fragment 0's, and round 2 stands for it
  CHECK(site.leader.waiting());
  // Round 1 refused changes nothing (version 2 is made); round 2 refused does: version 3 needs
  // another round of fragment 0 from this site, and round 3 is not one. Both would wait for good.
  site.peers.refused = 1;
  site.settle(5);
  CHECK(site.leader.waiting());
  site.peers.refused = 2;
  site.settle();
  CHECK(site.log.said.back() == "dropped 2");
  CHECK_FALSE(site.leader.waiting());
  CHECK(round() == 0);
  site.same_everywhere();
}

TEST_CASE("a replica that joined with a round in flight takes the leader's aim at its first attempt") {
  Site site(plan(2, true, 40), 4);
  site.step();
  site.step();  // round 0 (fragment 0) in flight: the leader aims its next round at version 2
  REQUIRE(site.peers.submitted.size() == 1);
  // A replica joins: healed from a peer (state, weights, step), its own round state fresh.
  OuterState joined_state = site.leader_state;
  FakeTraining joined_training = site.lead_training;
  Log joined_log;
  RoundDriver joined(plan(2, true, 40), joined_state, joined_log, [&] { return site.now; });
  FakeChannel joined_channel{site.wire, false};
  Replica l{site.lead_channel, site.lead_training}, j{joined_channel, joined_training};
  site.leader.catch_up();
  joined.catch_up();
  while (site.leader.attempt(l, 0ms)) joined.attempt(j, 0ms);
  joined.attempt(j, 0ms);
  for (int s = 0; s < 2; ++s) {
    site.lead_training.train();
    joined_training.train();
    site.leader.after_step(l, site.lead_training.steps, false, false);
    joined.after_step(j, joined_training.steps, false, false);
    for (int i = 0; i < 5 && site.leader.waiting(); ++i) {
      site.leader.attempt(l, 0ms);
      joined.attempt(j, 0ms);
    }
  }
  REQUIRE(site.peers.submitted.size() == 2);
  CHECK(site.peers.submitted[1].fragment == 1);
  // It encoded the fragment the leader sent: the same residual, the same working weights.
  CHECK(joined_training.w == site.lead_training.w);
  CHECK(OuterState::weights_hash(joined_state.start()) == OuterState::weights_hash(site.leader_state.start()));
}

TEST_CASE("a lost round is dropped on every replica, and three in a row stop the site with Error(Data)") {
  Site site(plan(2, false));
  site.step();
  site.peers.lost = site.peers.refused = 0;
  site.step();
  CHECK(site.log.said.back() == "dropped 0");
  site.same_everywhere();
  CHECK(site.lead_training.w == std::vector<float>(site.leader_state.global().begin(), site.leader_state.global().end()));
  site.step();
  site.peers.lost = site.peers.refused = 1;
  site.step();
  site.step();
  site.peers.lost = site.peers.refused = 2;
  testing::error_of(ErrorKind::Data, [&] { site.step(); });
}

TEST_CASE("a peer's state taken while behind fast-forwards the site to the job's step") {
  Site site(plan(4));
  site.peers.peers_round = 9;
  site.peers.newest = 3;
  site.leader.catch_up();
  site.member.catch_up();
  // The fake hands out commits, not states: the catch-up applies versions until it holds the newest.
  site.peers.commits = {{0}, {0}, {0}};
  site.settle();
  CHECK(site.leader_state.version() == 3);
  CHECK(site.log.said.back() == "caught up 3");
  site.leader.take_up_job();
  site.member.take_up_job();
  site.settle();
  CHECK(site.lead_training.steps == 40);  // (round 9 + 1) x 4 steps
  site.same_everywhere();
}

TEST_CASE(
    "a version that does not hash here as its commit says: nothing of it applied, the site waits for a peer's state "
    "and takes it") {
  Site site(plan(2, false));
  site.step();
  site.peers.commits.push_back({0});
  site.peers.wrong_hash = true;
  site.step();  // the round ends, and its version comes with a hash this site's copy does not give
  CHECK(site.leader_state.version() == 0);
  CHECK(site.member_state.version() == 0);
  REQUIRE(site.peers.diverged_at.size() == 1);
  CHECK(site.peers.diverged_at[0].first == 1);
  CHECK(site.peers.diverged_at[0].second.find("site a: version 1 computed here hashes to") != std::string::npos);
  CHECK(site.peers.diverged_at[0].second.find("this site's copy of version 0 differs from its peers'") !=
        std::string::npos);
  site.settle(5);
  CHECK(site.leader.waiting());  // the round's wait holds until a peer's state comes
  CHECK(site.leader_state.version() == 0);

  // A peer's state of version 2: every replica takes it, and the site trains on.
  OuterState peer(initial(), {}, CodecOptions{CodecKind::Fp32}, false, plan_of(1));
  for (std::int64_t v = 1; v <= 2; ++v) peer.commit(v, peer.preview({0}, std::vector<float>(kParams, 0.01f)));
  VersionCommit state;
  state.record.number = 2;
  state.record.params_hash = OuterState::weights_hash(peer.global());
  state.record.proposer = "b";
  state.snapshot = peer.snapshot();
  site.peers.state = std::move(state);
  site.settle();
  CHECK_FALSE(site.leader.waiting());
  CHECK(site.leader_state.version() == 2);
  CHECK(OuterState::weights_hash(site.leader_state.global()) == OuterState::weights_hash(peer.global()));
  CHECK(site.peers.diverged_at.size() == 1);
  site.same_everywhere();
  site.peers.commits.push_back({0});
  site.step();
  site.step();
  CHECK(site.leader_state.version() == 3);  // versions apply to the state taken
  site.same_everywhere();
}

TEST_CASE("drain: waits until no round of the site is unmerged, then leaves") {
  Site site(plan(2));
  site.step();
  site.step();
  site.leader.drain();
  site.member.drain();
  site.settle(3);
  CHECK(site.leader.waiting());
  CHECK_FALSE(site.peers.announcing);  // no commit waits for a round of it any more
  CHECK_FALSE(site.peers.left);
  site.peers.commits.push_back({0});
  site.settle();
  CHECK(site.peers.left);
  site.same_everywhere();
}

TEST_CASE("each replica previews a version once: a leader whose proposal won applies the outcome it previewed") {
  Site site(plan(2, false));
  site.peers.own_proposal = true;
  site.step();
  site.peers.commits.push_back({0});
  site.step();
  REQUIRE(site.leader_state.version() == 1);
  CHECK(site.leader_state.previews() == 1);  // the proposal's, in poll_commit
  CHECK(site.member_state.previews() == 1);  // its own, in apply
  site.same_everywhere();
  site.peers.own_proposal = false;  // another site's proposal won: the leader computes it
  site.step();
  site.peers.commits.push_back({0});
  site.step();
  REQUIRE(site.leader_state.version() == 2);
  CHECK(site.leader_state.previews() == 2);  // apply's own
  CHECK(site.member_state.previews() == 2);
  site.same_everywhere();
}
