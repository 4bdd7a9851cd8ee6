// A site whose copy of the outer state is not its version (crosssite/round/cross_site_copy.cpp),
// three sites in one thread against a real etcd (cross_site_fixture.hpp): the copy is kept out of
// checkpoints, rebuilt from the site's own checkpoint and journal without a peer, or, when the
// checkpoint is damaged too, replaced by a peer's state of the very version it holds.
#include <doctest/doctest.h>

#include <algorithm>

#include "tests/crosssite/cross_site_fixture.hpp"
#include "tests/support/flipped_bit.hpp"

using namespace meridian;
using namespace meridian::testing;
using namespace std::chrono_literals;

namespace {

// Sites a, b and c, c with a journal and a disk (its checkpoint: `disk`), joined; version 1
// checkpointed at c, versions 2 and 3 applied everywhere since; then a bit of c's copy flips.
struct DamagedC {
  std::optional<OuterState> disk;
  std::vector<std::unique_ptr<Site>> sites;

  explicit DamagedC(const EtcdServer& etcd) {
    for (const std::string name : {"a", "b", "c"}) {
      const auto tune = [&](CrossSiteOptions& o) {
        if (name != "c") return;
        o.journal = std::make_shared<MemoryDeltaJournal>();
        o.saved_state = [this] { return disk; };
      };
      sites.push_back(std::make_unique<Site>("job", name, etcd.endpoint(), CodecOptions{CodecKind::Int8, 256},
                                             LinkFaults{}, 16 << 10, CommitRuleOptions{}, FragmentPlan{}, std::nullopt,
                                             std::map<std::string, std::string>{}, LinkWrapper{}, tune));
    }
    join_all(sites);
    for (std::int64_t round = 0; round < 3; ++round) {
      for (auto& s : sites) s->submit(round);
      commit_all(sites);
      if (round == 0) {
        REQUIRE(c().cross.may_checkpoint(c().state));
        disk = c().state;
        c().cross.durable(1);
      }
    }
    flip_bit(c().state, 100);
  }
  Site& c() { return *sites[2]; }

  // Polls every site until c takes a state; c's commit.
  CrossSite::Commit taken() {
    const double deadline = seconds_now() + 10;
    while (true) {
      REQUIRE_MESSAGE(seconds_now() < deadline, "c waits for ", c().cross.describe_wait());
      if (auto commit = c().cross.poll_commit(c().state, 5ms)) return *commit;
      for (Site* peer : {sites[0].get(), sites[1].get()}) CHECK_FALSE(peer->cross.poll_commit(peer->state, 1ms));
    }
  }
  std::vector<CrossSiteEvent> events_of(const std::string& kind) {
    auto events = c().cross.take_events();
    std::erase_if(events, [&](const CrossSiteEvent& e) { return e.kind != kind; });
    return events;
  }
};

}  // namespace

TEST_CASE(
    "a site whose copy is damaged writes no checkpoint, and rebuilds the copy from its own checkpoint and journal") {
  EtcdServer etcd;
  DamagedC job(etcd);
  Site& c = job.c();
  // Found before a checkpoint takes it: the one of version 1 stays.
  CHECK_FALSE(c.cross.may_checkpoint(c.state));
  auto commit = job.taken();
  CHECK_FALSE(commit.snapshot.empty());
  CHECK(commit.record.number == 3);  // the version it holds, again
  c.apply(commit);
  CHECK(c.state.version() == 3);
  CHECK(OuterState::weights_hash(c.state.global()) == job.sites[0]->last->params_hash);
  CHECK(c.cross.traffic().copies_rebuilt == 1);
  CHECK(c.cross.traffic().states_adopted == 0);
  for (Site* peer : {job.sites[0].get(), job.sites[1].get()}) CHECK(peer->cross.traffic().states_sent == 0);
  const auto events = c.cross.take_events();
  const auto said = [&](const std::string& kind) {
    return std::find_if(events.begin(), events.end(), [&](const CrossSiteEvent& e) { return e.kind == kind; });
  };
  REQUIRE(said("version_diverged") != events.end());
  CHECK(said("version_diverged")->detail.ends_with("; rebuilding it from this site's checkpoint and journal"));
  REQUIRE(said("copy_rebuilt") != events.end());
  CHECK(said("copy_rebuilt")->number == 3);
  CHECK(said("copy_rebuilt")->detail == "from its checkpoint of version 1 and 2 versions' deltas from its journal");
  CHECK(c.cross.may_checkpoint(c.state));
  // From here c's versions come as the others' do.
  for (auto& s : job.sites) s->submit(3);
  commit_all(job.sites);
  for (auto& s : job.sites) CHECK(OuterState::weights_hash(s->state.global()) == job.sites[0]->last->params_hash);
}

TEST_CASE("a site whose checkpoint is damaged too takes a peer's state of the version it holds") {
  EtcdServer etcd;
  DamagedC job(etcd);
  Site& c = job.c();
  flip_bit(*job.disk, 7);
  CHECK_FALSE(c.cross.may_checkpoint(c.state));  // found as its next checkpoint would be written
  auto commit = job.taken();
  CHECK_FALSE(commit.snapshot.empty());
  CHECK(commit.record.number == 3);
  c.apply(commit);
  CHECK(OuterState::weights_hash(c.state.global()) == job.sites[0]->last->params_hash);
  CHECK(c.cross.traffic().copies_rebuilt == 0);
  CHECK(c.cross.traffic().states_adopted == 1);
  const auto refused = job.events_of("copy_not_rebuilt");
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].detail.starts_with("the checkpoint's copy of version 1 hashes to "));
  CHECK(refused[0].detail.ends_with("; taking a peer's state instead"));
}
