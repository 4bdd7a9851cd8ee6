// The cross-site protocol under injected faults, three sites in one thread against a real etcd
// (cross_site_fixture.hpp): damaged links, poisoned deltas, a site that fell behind. Whatever
// happens, every site holds the same bits for every version and nothing refused is ever merged.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "tests/crosssite/cross_site_fixture.hpp"

using namespace meridian;
using namespace meridian::testing;
using namespace std::chrono_literals;

namespace {

// Every (site, round) any commit in etcd merged, checking each is merged at most once.
std::set<SiteRound> merged_once(EtcdClient& etcd, std::int64_t versions) {
  std::set<SiteRound> merged;
  const auto log = etcd.get_prefix(RoundKeys("job").commits());
  CHECK(static_cast<std::int64_t>(log.size()) == versions);
  for (const auto& [key, value] : log)
    for (const auto& e : decode_commit(value).entries) CHECK(merged.insert({e.site, e.round}).second);
  return merged;
}

// The norm screen's history: three commits of every site's ordinary delta. Returns the next round.
std::int64_t ordinary_commits(std::vector<std::unique_ptr<Site>>& sites) {
  std::int64_t round = 0;
  for (; round < 3; ++round) {
    for (auto& s : sites) s->submit(round);
    commit_all(sites);
  }
  return round;
}

// Rounds 0 .. versions - 1 of a and b alone, each committed and applied by both; the third site
// is not polled (gone, or not looking).
void commit_by_two(Site& a, Site& b, std::int64_t versions) {
  for (std::int64_t round = 0; round < versions; ++round) {
    a.submit(round);
    b.submit(round);
    const double deadline = seconds_now() + 10;
    while (a.state.version() <= round || b.state.version() <= round) {
      REQUIRE(seconds_now() < deadline);
      for (Site* s : {&a, &b})
        if (s->state.version() <= round)
          if (auto commit = s->cross.poll_commit(s->state, 5ms)) s->apply(*commit);
    }
  }
}

// Sites a, b and c with a quorum of two; c goes away (its lease revoked) and a and b commit four
// versions without it, sending it nothing; then c comes back without its disk (not joined yet).
std::vector<std::unique_ptr<Site>> c_back_four_versions_behind(const EtcdServer& etcd, CodecOptions codec) {
  CommitRuleOptions two;
  two.quorum = 2;
  auto sites = joined_sites(etcd, codec, {}, 16 << 10, two);
  sites[2].reset();
  commit_by_two(*sites[0], *sites[1], 4);
  REQUIRE(sites[0]->state.version() == 4);
  sites[2] = std::make_unique<Site>("job", "c", etcd.endpoint(), codec, LinkFaults{}, 16 << 10, two);
  return sites;
}

std::uint64_t injected(const std::vector<std::unique_ptr<Site>>& sites) {
  std::uint64_t n = 0;
  for (const auto& s : sites) n += s->link->counters().faults_injected;
  return n;
}

}  // namespace

TEST_CASE("over a thousand damaged, cut, repeated and reordered chunks: refused, deduplicated or put in place, every version the same everywhere") {
  EtcdServer etcd;
  LinkFaults faults;
  faults.corrupt_probability = 0.05;
  faults.truncate_probability = 0.05;
  faults.duplicate_probability = 0.05;
  faults.reorder_probability = 0.05;
  faults.seed = 11;
  // 4 KiB chunks: each fp32 delta of 50,000 values is 49 chunks to each of two peers.
  auto sites = joined_sites(etcd, {CodecKind::Fp32, 0}, faults, 4 << 10);
  std::int64_t round = 0;
  while (injected(sites) < 1000) {
    REQUIRE(round < 60);
    for (auto& s : sites) s->submit(round);
    commit_all(sites);  // REQUIREs every site's outcome to hash as the commit says
    for (auto& s : sites) CHECK(OuterState::weights_hash(s->state.global()) == sites[0]->last->params_hash);
    ++round;
  }
  std::uint64_t rejected = 0, duplicates = 0, reordered = 0, refused = 0;
  for (auto& s : sites) {
    rejected += s->link->counters().rejected;
    duplicates += s->link->counters().duplicates;
    reordered += s->link->counters().reordered;
    refused += s->cross.traffic().refused.deltas_damaged;
  }
  MESSAGE(round, " rounds, ", injected(sites), " faults injected: ", rejected, " frames refused, ", duplicates,
          " duplicates dropped, ", reordered, " frames reordered, ", refused, " deltas refused whole");
  CHECK(rejected > 0);
  CHECK(duplicates > 0);
  CHECK(reordered > 0);
  const auto merged = merged_once(sites[0]->etcd, round);
  CHECK(merged.size() == static_cast<std::size_t>(3 * round));  // no round lost, none twice
}

TEST_CASE("a delta with NaN, Inf or a hundred times the usual norm is refused everywhere and its sender flagged") {
  EtcdServer etcd;
  auto sites = joined_sites(etcd, {CodecKind::Fp32, 0});
  Site& b = *sites[1];
  std::int64_t round = ordinary_commits(sites);
  // The codec refuses to encode a non-finite value, so those are written into the bytes (fp32:
  // the raw floats after the header), as a broken or hostile peer would.
  const auto write_float = [](std::size_t index, float value) {
    return [=](std::vector<std::byte>& bytes) {
      std::memcpy(bytes.data() + kCodecHeaderBytes + 4 * index, &value, 4);
    };
  };
  struct Poison {
    std::function<void(std::vector<float>&)> tamper;
    std::function<void(std::vector<std::byte>&)> forge;
  };
  const std::vector<Poison> poisons = {
      {{}, write_float(1234, std::numeric_limits<float>::quiet_NaN())},
      {{}, write_float(7, -std::numeric_limits<float>::infinity())},
      {[&](std::vector<float>& w) {  // the same direction, 100x as far
         for (std::size_t i = 0; i < w.size(); ++i) w[i] = b.state.start()[i] + 100.0f * (w[i] - b.state.start()[i]);
       },
       {}},
  };
  std::set<SiteRound> poisoned;
  for (const auto& poison : poisons) {
    sites[0]->submit(round);
    sites[2]->submit(round);
    b.submit(round, poison.tamper, poison.forge);  // round r poisoned, round r + 1 honest: that one is merged
    poisoned.insert({"b", round});
    ++round;
    b.submit(round);
    ++round;
    commit_all(sites);
    for (auto& s : sites) {
      REQUIRE(s->last->entries.size() == 3);
      CHECK(s->last->entries[1].site == "b");
      CHECK(s->last->entries[1].round == round - 1);
    }
  }
  const auto merged = merged_once(sites[0]->etcd, 6);
  for (const auto& p : poisoned) CHECK_FALSE(merged.contains(p));
  // Whoever proposed looked at b's delta, refused it and said so, naming b (the others never
  // needed to look: the commit came first, listing b's next round).
  std::set<std::int64_t> flagged;
  std::uint64_t screened_out = 0;
  for (auto& s : sites) {
    screened_out += s->cross.traffic().deltas_screened_out;
    for (const auto& e : s->cross.take_events())
      if (e.kind == "delta_refused") {
        CHECK(e.site == "b");
        flagged.insert(e.number);
      }
  }
  CHECK(screened_out >= 3);
  CHECK(flagged.size() == 3);
  for (const auto& [site, r] : poisoned) CHECK(flagged.contains(r));
}

TEST_CASE("a delta announced as spanning paused rounds is screened against that many rounds' norm") {
  EtcdServer etcd;
  auto sites = joined_sites(etcd, {CodecKind::Fp32, 0});
  Site& b = *sites[1];
  std::int64_t round = ordinary_commits(sites);
  // b's delta 40 times as far as its usual one: past 20 x the median for one round, within it for three.
  const auto far = [&](std::vector<float>& w) {
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = b.state.start()[i] + 40.0f * (w[i] - b.state.start()[i]);
  };
  for (const int rounds : {3, 1}) {
    sites[0]->submit(round);
    sites[2]->submit(round);
    b.submit(round, far, {}, 0, {}, rounds);
    ++round;
    if (rounds == 1) b.submit(round++);  // refused: the honest round after it is merged instead
    commit_all(sites);
    REQUIRE(sites[0]->last->entries.size() == 3);
    CHECK(sites[0]->last->entries[1].site == "b");
    CHECK(sites[0]->last->entries[1].round == round - 1);
  }
  std::uint64_t screened_out = 0;
  for (auto& s : sites) screened_out += s->cross.traffic().deltas_screened_out;
  CHECK(screened_out >= 1);
  CHECK_FALSE(merged_once(sites[0]->etcd, 5).contains({"b", round - 2}));
}

TEST_CASE("a site that fell behind adopts a peer's state, from another peer when the first does not answer") {
  EtcdServer etcd;
  auto sites = c_back_four_versions_behind(etcd, {CodecKind::Int8, 256});
  Site& a = *sites[0];
  Site& b = *sites[1];
  // a stops answering (alive, lease held, link silent): c asks a first, then b.
  Site& c = *sites[2];
  const double join_deadline = seconds_now() + 10;
  while (!c.cross.poll_join(5ms)) REQUIRE(seconds_now() < join_deadline);
  const double deadline = seconds_now() + 10;
  while (c.state.version() < 4) {
    REQUIRE(seconds_now() < deadline);
    if (auto commit = c.cross.poll_commit(c.state, 5ms)) {
      CHECK_FALSE(commit->snapshot.empty());
      c.apply(*commit);
    }
    CHECK_FALSE(b.cross.poll_commit(b.state, 5ms).has_value());
  }
  CHECK(c.state.version() == 4);
  CHECK(OuterState::weights_hash(c.state.global()) == a.last->params_hash);
  CHECK(c.cross.traffic().states_adopted == 1);
  CHECK(b.cross.traffic().states_sent == 1);
  std::vector<std::string> asked;
  for (const auto& e : c.cross.take_events())
    if (e.kind == "state_requested") asked.push_back(e.site);
  REQUIRE(asked.size() >= 2);
  CHECK(asked[0] == "a");
  CHECK(asked[1] == "b");
  // From here c contributes like the others.
  for (auto& s : sites) s->submit(s->cross.next_round() + 4);
  commit_all(sites);
  CHECK(c.last->entries.size() >= 2);
  for (auto& s : sites) CHECK(OuterState::weights_hash(s->state.global()) == a.last->params_hash);
}

TEST_CASE(
    "a site back one version behind a commit made while it was away asks for that commit's deltas at once: nobody "
    "sends them unasked") {
  EtcdServer etcd;
  const CodecOptions codec{CodecKind::Int8, 256};
  CommitRuleOptions two;
  two.quorum = 2;
  auto sites = joined_sites(etcd, codec, {}, 16 << 10, two);
  sites[2].reset();
  commit_by_two(*sites[0], *sites[1], 1);
  // c comes back without its disk. Peers push a site that (re)joins only the deltas no commit has
  // merged, and c would ask again only after a minute, or take a peer's state after one: version
  // 1's deltas reach it in time only because it asks for them at once.
  const auto patient = [](CrossSiteOptions& o) {
    o.rerequest_after = 60s;
    o.catch_up_after = 60s;
  };
  sites[2] = std::make_unique<Site>("job", "c", etcd.endpoint(), codec, LinkFaults{}, 16 << 10, two, FragmentPlan{},
                                    std::nullopt, std::map<std::string, std::string>{}, LinkWrapper{}, patient);
  Site& c = *sites[2];
  const double deadline = seconds_now() + 10;
  while (!c.cross.poll_join(5ms)) REQUIRE(seconds_now() < deadline);
  while (c.state.version() < 1) {
    REQUIRE_MESSAGE(seconds_now() < deadline, "c waits for ", c.cross.describe_wait());
    if (auto commit = c.cross.poll_commit(c.state, 5ms)) {
      CHECK(commit->snapshot.empty());
      c.apply(*commit);
    }
    for (Site* peer : {sites[0].get(), sites[1].get()}) CHECK_FALSE(peer->cross.poll_commit(peer->state, 1ms));
  }
  CHECK(OuterState::weights_hash(c.state.global()) == sites[0]->last->params_hash);
  CHECK(c.cross.traffic().requests_sent == 2);
  CHECK(c.cross.traffic().states_adopted == 0);
  for (Site* peer : {sites[0].get(), sites[1].get()}) {  // each sent its delta again, once
    CHECK(peer->cross.traffic().deltas_resent == 1);
    CHECK(peer->cross.traffic().bytes_resent >= kParams);  // int8: a byte per parameter
  }
}

TEST_CASE("a site whose copy does not give a commit's hash hands out no commit after it, and takes a peer's state") {
  EtcdServer etcd;
  auto sites = joined_sites(etcd, {CodecKind::Int8, 256});
  for (auto& s : sites) s->submit(0);
  commit_all(sites);
  Site& a = *sites[0];
  Site& c = *sites[2];
  for (auto& s : sites) s->submit(1);
  // c is handed version 2 and its replicas find that their copy of version 1 does not give its hash.
  const double deadline = seconds_now() + 10;
  std::optional<CrossSite::Commit> second;
  while (!second) {
    REQUIRE(seconds_now() < deadline);
    second = c.cross.poll_commit(c.state, 5ms);
    for (Site* peer : {sites[0].get(), sites[1].get()})
      if (peer->state.version() < 2)
        if (auto commit = peer->cross.poll_commit(peer->state, 1ms)) peer->apply(*commit);
  }
  REQUIRE(second->snapshot.empty());
  REQUIRE(second->record.number == 2);
  c.cross.diverged(2, "site c: version 2 computed here hashes to 1, the commit says 2");
  while (c.state.version() < 2) {
    REQUIRE_MESSAGE(seconds_now() < deadline, "c waits for ", c.cross.describe_wait());
    if (auto commit = c.cross.poll_commit(c.state, 5ms)) {
      CHECK_FALSE(commit->snapshot.empty());  // a peer's state, never a commit's deltas
      c.apply(*commit);
    }
    for (Site* peer : {sites[0].get(), sites[1].get()})
      if (peer->state.version() < 2) {
        if (auto commit = peer->cross.poll_commit(peer->state, 1ms)) peer->apply(*commit);
      } else {
        CHECK_FALSE(peer->cross.poll_commit(peer->state, 1ms).has_value());
      }
  }
  CHECK(OuterState::weights_hash(c.state.global()) == a.last->params_hash);
  CHECK(c.cross.traffic().states_adopted == 1);
  const auto events = c.cross.take_events();
  const auto said =
      std::find_if(events.begin(), events.end(), [](const CrossSiteEvent& e) { return e.kind == "version_diverged"; });
  REQUIRE(said != events.end());
  CHECK(said->number == 2);
  CHECK(said->detail ==
        "site c: version 2 computed here hashes to 1, the commit says 2; taking a peer's state instead");
  // From here c's commits come as for the others.
  for (auto& s : sites) s->submit(2);
  commit_all(sites);
  for (auto& s : sites) CHECK(OuterState::weights_hash(s->state.global()) == a.last->params_hash);
}

TEST_CASE("a site that adopted a peer's state screens as its peers do: the screen's history comes with the version") {
  EtcdServer etcd;
  auto sites = c_back_four_versions_behind(etcd, {CodecKind::Fp32, 0});
  Site& a = *sites[0];
  Site& b = *sites[1];
  REQUIRE(a.last->screens.size() == 1);
  CHECK(a.last->screens[0].size() == 8);  // the norms of the eight deltas merged so far
  Site& c = *sites[2];
  const double deadline = seconds_now() + 10;
  while (!c.cross.poll_join(5ms)) REQUIRE(seconds_now() < deadline);
  while (c.state.version() < 4) {
    REQUIRE(seconds_now() < deadline);
    if (auto commit = c.cross.poll_commit(c.state, 5ms)) c.apply(*commit);
    b.cross.poll_commit(b.state, 1ms);
  }
  REQUIRE(c.cross.traffic().states_adopted == 1);
  // b's next delta goes 100 times as far: c, which merged none of the deltas before, refuses it as
  // a and b would, rather than taking it into its proposal with a screen that knows no norm yet.
  const std::int64_t round = 4;  // after commit_by_two's 0-3
  b.submit(round, [&](std::vector<float>& w) {
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = b.state.start()[i] + 100.0f * (w[i] - b.state.start()[i]);
  });
  const double screened_by = seconds_now() + 10;
  while (c.cross.traffic().deltas_screened_out == 0) {
    if (seconds_now() >= screened_by) for (auto& s : sites) MESSAGE("DBG ", s->name, " v", s->state.version(), " waits for ", s->cross.describe_wait(), " backlog ", s->cross.backlog(s->state));
    REQUIRE(seconds_now() < screened_by);
    for (auto& s : sites) s->cross.poll_commit(s->state, 2ms);  // none proposes: b's is the only delta
  }
  a.submit(round);
  c.submit(round);
  commit_all(sites);
  REQUIRE(c.last->entries.size() == 2);
  for (const auto& e : c.last->entries) CHECK(e.site != "b");
}

TEST_CASE("a paused site that a burst of commits left behind applies their deltas, asking no peer's state") {
  EtcdServer etcd;
  auto sites = joined_sites(etcd, {CodecKind::Int8, 256});
  Site& a = *sites[0];
  Site& b = *sites[1];
  Site& c = *sites[2];
  // c's outer exchange is paused: its record says so once it next pumps, and a and b stop waiting for it.
  c.cross.set_proposing(false);
  CHECK_FALSE(c.cross.poll_commit(c.state, 5ms).has_value());
  const double paused_deadline = seconds_now() + 10;
  while (!decode_member(*c.etcd.get(RoundKeys("job").member("c"))).paused) {
    REQUIRE(seconds_now() < paused_deadline);
    CHECK_FALSE(c.cross.poll_commit(c.state, 5ms).has_value());
  }
  // a and b commit three versions while c does not look: their deltas reach c's link all the same.
  commit_by_two(a, b, 3);
  // Three versions behind, c holds every delta they merged: it applies them one by one.
  const double deadline = seconds_now() + 10;
  while (c.state.version() < 3) {
    REQUIRE(seconds_now() < deadline);
    if (auto commit = c.cross.poll_commit(c.state, 5ms)) {
      CHECK(commit->snapshot.empty());
      CHECK(commit->record.number == c.state.version() + 1);
      c.apply(*commit);
    }
  }
  CHECK(OuterState::weights_hash(c.state.global()) == a.last->params_hash);
  CHECK(c.cross.traffic().states_adopted == 0);
  for (const auto& e : c.cross.take_events()) CHECK_MESSAGE(e.kind != "state_requested", e.kind, " ", e.detail);
  CHECK(a.cross.traffic().states_sent + b.cross.traffic().states_sent == 0);
}

TEST_CASE("a delta still on its way from a site that left once its round was merged is taken in, not refused") {
  EtcdServer etcd;
  auto sites = joined_sites(etcd, {CodecKind::Int8, 256});
  Site& a = *sites[0];
  Site& b = *sites[1];
  Site& c = *sites[2];
  for (auto& s : sites) s->submit(0);
  // b and c commit version 1 and apply it while a does not look; then b leaves (a drain, or the
  // job's end): its delta, listed in version 1, is still unread on a's link.
  const double deadline = seconds_now() + 10;
  while (b.state.version() < 1 || c.state.version() < 1) {
    REQUIRE(seconds_now() < deadline);
    for (Site* s : {&b, &c})
      if (s->state.version() < 1)
        if (auto commit = s->cross.poll_commit(s->state, 5ms)) s->apply(*commit);
  }
  b.cross.leave();
  while (a.state.version() < 1) {
    REQUIRE_MESSAGE(seconds_now() < deadline + 10, "a waits for ", a.cross.describe_wait());
    if (auto commit = a.cross.poll_commit(a.state, 5ms)) {
      CHECK(commit->snapshot.empty());
      a.apply(*commit);
    }
    CHECK_FALSE(c.cross.poll_commit(c.state, 1ms).has_value());
  }
  CHECK(a.last->entries.size() == 3);
  CHECK(OuterState::weights_hash(a.state.global()) == c.last->params_hash);
  CHECK(a.cross.traffic().refused.total() == 0);
}

TEST_CASE(
    "a record written over the one its peers applied is never applied by a site that reads it first, and they put it "
    "back") {
  EtcdServer etcd;
  auto sites = joined_sites(etcd, {CodecKind::Int8, 256});
  Site& a = *sites[0];
  Site& b = *sites[1];
  Site& c = *sites[2];
  for (std::int64_t round = 0; round < 2; ++round) {
    for (auto& s : sites) s->submit(round);
    commit_all(sites);
  }
  // a and b make version 3 of every site's round 2 while c does not look (their deltas reach c's
  // link all the same), and vouch for it under their own keys at their next looks.
  for (auto& s : sites) s->submit(2);
  const RoundKeys keys("job");
  const auto vouched = [&](const std::string& site) {
    const auto bytes = a.etcd.get(keys.vouch(site));
    return bytes ? decode_vouch(*bytes).version : 0;
  };
  const double vouched_by = seconds_now() + 10;
  while (vouched("a") < 3 || vouched("b") < 3) {
    REQUIRE(seconds_now() < vouched_by);
    for (Site* s : {&a, &b})
      if (auto commit = s->cross.poll_commit(s->state, 5ms)) s->apply(*commit);
  }
  // A member writes version 3's record over with its own: the same deltas, another proposer.
  const std::string applied = *a.etcd.get(keys.commit(3));
  auto forged = decode_commit(applied);
  forged.proposer = "mallory";
  a.etcd.put(keys.commit(3), encode(forged));
  // c reads mallory's record first, holds both deltas it lists, and applies nothing of it.
  const double looked_until = seconds_now() + 1;
  while (seconds_now() < looked_until) CHECK_FALSE(c.cross.poll_commit(c.state, 5ms).has_value());
  CHECK(c.cross.waiting().what == Waiting::What::Contradicted);
  auto events = c.cross.take_events();
  const auto said = std::find_if(events.begin(), events.end(),
                                 [](const CrossSiteEvent& e) { return e.kind == "commit_contradicted"; });
  REQUIRE(said != events.end());
  CHECK(said->number == 3);
  CHECK((said->site == "a" || said->site == "b"));
  // a and b see the record they applied written over, and put it back; c reads it afresh.
  const double deadline = seconds_now() + 15;
  while (c.state.version() < 3) {
    REQUIRE_MESSAGE(seconds_now() < deadline, "c waits for ", c.cross.describe_wait());
    if (auto commit = c.cross.poll_commit(c.state, 5ms)) {
      CHECK(commit->record.proposer != "mallory");
      c.apply(*commit);
    }
    for (Site* s : {&a, &b}) CHECK_FALSE(s->cross.poll_commit(s->state, 1ms).has_value());
  }
  CHECK(*a.etcd.get(keys.commit(3)) == applied);
  int restored = 0;
  for (Site* s : {&a, &b})
    for (const auto& e : s->cross.take_events()) restored += e.kind == "commit_restored" && e.number == 3;
  CHECK(restored == 1);  // one swap wins
  CHECK(OuterState::weights_hash(c.state.global()) == a.last->params_hash);
  // From here c's versions come as the others' do.
  for (auto& s : sites) s->submit(3);
  commit_all(sites);
}
