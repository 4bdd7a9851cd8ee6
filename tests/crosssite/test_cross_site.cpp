// Three sites in one thread against a real etcd (cross_site_fixture.hpp): the round/commit
// protocol end to end.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <numeric>
#include <set>
#include <vector>

#include "tests/support/run_process.hpp"
#include "sim/protocol/mutant_seams.hpp"
#include "tests/crosssite/cross_site_fixture.hpp"

using namespace meridian;
using namespace meridian::testing;
using namespace std::chrono_literals;


namespace {

// Sites a, b and c joined over CURVE, each with a keypair of its own and the job's three public
// keys (`keys`, by site, filled in).
// `wraps`: by site, what goes around its link.
std::vector<std::unique_ptr<Site>> curve_sites(const EtcdServer& etcd, std::map<std::string, std::string>& keys,
                                               const std::map<std::string, LinkWrapper>& wraps = {}) {
  std::map<std::string, CurveKeypair> pairs;
  std::set<std::string> job_keys;
  for (const char* name : {"a", "b", "c"}) {
    pairs[name] = make_curve_keypair();
    keys[name] = pairs[name].public_key;
    job_keys.insert(pairs[name].public_key);
  }
  std::vector<std::unique_ptr<Site>> sites;
  for (const char* name : {"a", "b", "c"})
    sites.push_back(std::make_unique<Site>("job", name, etcd.endpoint(), CodecOptions{CodecKind::Int8, 256}, LinkFaults{},
                                           16 << 10, CommitRuleOptions{}, FragmentPlan{}, LinkCurve{pairs[name], job_keys},
                                           keys, wraps.contains(name) ? wraps.at(name) : LinkWrapper{}));
  join_all(sites);
  return sites;
}

}  // namespace

TEST_CASE("three sites: one commit per version, every site applies it to the same bits") {
  EtcdServer etcd;
  auto sites = joined_sites(etcd, {CodecKind::Int8, 256});
  for (std::int64_t round = 0; round < 3; ++round) {
    for (auto& s : sites) s->submit(round);
    commit_all(sites);
    for (auto& s : sites) {
      CHECK(s->state.version() == round + 1);
      CHECK(*s->last == *sites[0]->last);
      CHECK(s->last->entries.size() == 3);
      CHECK(OuterState::weights_hash(s->state.global()) == sites[0]->last->params_hash);
    }
  }
  std::uint64_t won = 0, proposed = 0, sent = 0, asked_again = 0;
  for (auto& s : sites) {
    won += s->cross.traffic().commits_won;
    proposed += s->cross.traffic().commits_proposed;
    CHECK(s->cross.traffic().refused.total() == 0);
    // int8: one byte per parameter plus a scale per 256, to each of two peers, per round.
    CHECK(s->cross.traffic().bytes_sent >= 3 * 2 * kParams);
    sent += s->cross.traffic().bytes_sent;
    // A loaded machine may make a receiver ask for a delta or a chunk again: those are re-sent.
    asked_again += s->cross.traffic().requests_sent + s->link->counters().rerequests;
  }
  CHECK(sent <= (3 * 3 * 2 + asked_again) * (kParams * 1.02 + 64));
  CHECK(won == 3);  // exactly one proposal won each version
  CHECK(proposed >= 3);
  // The commit log in etcd holds exactly versions 1..3.
  const auto log = sites[0]->etcd.get_prefix(RoundKeys("job").commits());
  CHECK(log.size() == 3);
}

TEST_CASE("a site whose member key was deleted, or overwritten with junk, writes it again and stays in the job") {
  EtcdServer etcd;
  auto sites = joined_sites(etcd, {CodecKind::Int8, 256});
  Site& b = *sites[1];
  const std::string key = RoundKeys("job").member("b");
  const auto damage = [&](bool junk) {
    if (junk) {
      sites[0]->etcd.put(key, "not a member record");
      return;
    }
    const auto r = run_process({"/usr/bin/etcdctl", "--endpoints=" + etcd.endpoint(), "del", key},
                               {.cwd = {}, .timeout = std::chrono::milliseconds(30000), .env = {"ETCDCTL_API=3"}});
    REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
    REQUIRE(r.out.find('1') != std::string::npos);  // one key deleted
  };
  for (std::int64_t round = 0; round < 2; ++round) {
    damage(round == 1);
    // b notices at its next look at the members (its watch fires on the change) and says so.
    bool restored = false;
    const double deadline = seconds_now() + 5;
    while (!restored && seconds_now() < deadline) {
      CHECK_FALSE(b.cross.poll_commit(b.state, 5ms).has_value());
      for (const auto& e : b.cross.take_events())
        restored = restored || (e.kind == "member_key_restored" && e.detail == key);
    }
    REQUIRE(restored);
    const auto value = sites[0]->etcd.get(key);
    REQUIRE(value.has_value());
    CHECK(decode_member(*value).site == "b");
    // And it is a member like the others: its delta is in the next commit.
    for (auto& s : sites) s->submit(round);
    commit_all(sites);
    CHECK(sites[0]->last->entries.size() == 3);
  }
}

TEST_CASE("junk where the next commit goes is replaced by a proposal, junk over a committed version is left alone") {
  EtcdServer etcd;
  auto sites = joined_sites(etcd, {CodecKind::Int8, 256});
  const RoundKeys keys("job");
  // Junk at versions 1 and 2 before anyone proposed them: the job goes on through both.
  sites[0]->etcd.put(keys.commit(1), "junk one");
  sites[0]->etcd.put(keys.commit(2), "junk two");
  for (std::int64_t round = 0; round < 3; ++round) {
    for (auto& s : sites) s->submit(round);
    commit_all(sites);
  }
  std::set<std::int64_t> replaced, unreadable;
  for (auto& s : sites)
    for (const auto& e : s->cross.take_events()) {
      if (e.kind == "commit_record_replaced") replaced.insert(e.number);
      if (e.kind == "commit_unreadable") unreadable.insert(e.number);
    }
  CHECK(replaced == std::set<std::int64_t>{1, 2});  // once each: one compare-and-swap won
  CHECK(unreadable == std::set<std::int64_t>{1, 2});
  for (std::int64_t v = 1; v <= 3; ++v) {
    const auto value = sites[0]->etcd.get(keys.commit(v));
    REQUIRE(value.has_value());
    CHECK(decode_commit(*value).number == v);
  }
  for (auto& s : sites) CHECK(OuterState::weights_hash(s->state.global()) == sites[0]->last->params_hash);

  // Junk over version 2, committed and applied everywhere: a newer commit (3) says so, and no
  // site ever writes a second version 2.
  sites[0]->etcd.put(keys.commit(2), "damage");
  for (auto& s : sites) s->submit(3);
  commit_all(sites);
  CHECK(sites[0]->etcd.get(keys.commit(2)) == "damage");
  for (auto& s : sites) {
    CHECK(s->state.version() == 4);
    for (const auto& e : s->cross.take_events()) CHECK(e.kind != "commit_record_replaced");
  }
}

TEST_CASE("a delta that does not match its announcement is never applied, whether refused and fetched again or dropped as late") {
  EtcdServer etcd;
  auto sites = joined_sites(etcd, {CodecKind::Fp32, 0});
  Site& a = *sites[0];
  Site& b = *sites[1];
  a.submit(0);
  // A forged delta follows a's real one under the same round from a's address (a different
  // transfer id, as a re-send would have). If it comes before b has checked the real one, it
  // replaces it and is refused and fetched again; if after, it is dropped (DeltaStore::arrive: a
  // copy that matched its digest is never replaced). Which one depends on the two processes'
  // timing; either way it is never applied.
  std::vector<std::byte> forged(encoded_size(kParams, {CodecKind::Fp32, 0}));
  encode(std::vector<float>(kParams, 1.0f), {CodecKind::Fp32, 0}, forged);
  a.link->send(b.link->address(), (std::uint64_t{0} << 20) | (1 << 16) | 999, static_cast<std::uint16_t>(LinkTag::Delta), forged);
  for (int i = 0; i < 20; ++i) CHECK_FALSE(b.cross.poll_commit(b.state, 5ms).has_value());
  sites[2]->submit(0);
  b.submit(0);
  commit_all(sites);
  if (b.cross.traffic().refused.deltas_damaged > 0) CHECK(b.cross.traffic().requests_sent >= 1);  // refused: fetched again
  for (auto& s : sites) CHECK(OuterState::weights_hash(s->state.global()) == a.last->params_hash);
  const auto& entries = b.last->entries;
  const auto real = std::find_if(entries.begin(), entries.end(), [](const CommitEntry& e) { return e.site == "a"; });
  REQUIRE(real != entries.end());
  CHECK(real->digest != delta_digest(std::span<const std::byte>(forged)));
}

TEST_CASE("a delta submitted with a wrong chunk hash is refused by its peers' links, never delivered") {
  EtcdServer etcd;
  auto sites = joined_sites(etcd, {CodecKind::Fp32, 0});  // 200 KB deltas: 13 chunks of 16 KiB
  sites[0]->submit(0, {}, {}, 0, [](ChunkHashes& h) { h.hashes[3] ^= 1; });
  const auto refused = [&](int i) { return sites[i]->link->counters().rejected > 0; };
  const double deadline = seconds_now() + 5;
  while (!(refused(1) && refused(2)) && seconds_now() < deadline)
    for (auto& s : sites) static_cast<void>(s->cross.poll_commit(s->state, 5ms));
  for (int i = 1; i < 3; ++i) {
    CHECK(refused(i));
    CHECK(sites[i]->cross.traffic().bytes_received == 0);
  }
}

TEST_CASE("transfers from a link that is no member of the job are refused by the link and named in one event") {
  EtcdServer etcd;
  auto sites = joined_sites(etcd, {CodecKind::Fp32, 0});
  Site& a = *sites[0];
  auto stranger = make_zmq_link("127.0.0.1");
  const std::vector<std::byte> junk(64, std::byte{7});
  std::vector<CrossSiteEvent> refusals;
  for (std::uint64_t id = 0; id < 3; ++id) {
    stranger->send(a.link->address(), id, static_cast<std::uint16_t>(LinkTag::Delta), junk);
    const double deadline = seconds_now() + 5;
    while (a.link->counters().strangers <= id && seconds_now() < deadline) a.cross.poll_commit(a.state, 5ms);
    for (const auto& e : a.cross.take_events())
      if (e.kind == "link_refused") refusals.push_back(e);
  }
  CHECK(a.link->counters().strangers == 3);
  CHECK(a.cross.traffic().frames_refused == 3);
  CHECK(a.cross.traffic().refused.total() == 0);  // refused before the protocol saw a byte
  // The first refusal is reported at once, the next two wait for the next report (10 s on).
  REQUIRE(refusals.size() == 1);
  CHECK(refusals[0].site == stranger->address());
  CHECK(refusals[0].number == 1);
  CHECK(a.state.version() == 0);
}

TEST_CASE("over CURVE: the job commits, an outsider's key is refused at the handshake and named, a member record with another key is not believed") {
  EtcdServer etcd;
  std::map<std::string, std::string> keys;
  auto sites = curve_sites(etcd, keys);
  for (auto& s : sites) CHECK(s->link->address().find(";curve=" + keys[s->name]) != std::string::npos);

  // An outsider with a key of its own sends a delta to a: nothing of it gets through, and a names it.
  const CurveKeypair outsider_keys = make_curve_keypair();
  auto outsider = make_zmq_link("127.0.0.1", 16 << 10, {}, 0, kLinkQueueBytes,
                                LinkCurve{outsider_keys, {outsider_keys.public_key, keys["a"]}});
  outsider->send(sites[0]->link->address(), 0, static_cast<std::uint16_t>(LinkTag::Delta), std::vector<std::byte>(64));
  std::vector<CrossSiteEvent> refusals;
  const double deadline = seconds_now() + 5;
  while (refusals.empty() && seconds_now() < deadline) {
    sites[0]->cross.poll_commit(sites[0]->state, 5ms);
    for (const auto& e : sites[0]->cross.take_events())
      if (e.kind == "link_refused") refusals.push_back(e);
  }
  REQUIRE(refusals.size() == 1);
  CHECK(refusals[0].site == "key " + outsider_keys.public_key.substr(0, 8) + " from 127.0.0.1");
  CHECK(sites[0]->link->counters().frames_received == 0);

  // c's record rewritten to name the outsider's key at c's endpoint: the others no longer believe it.
  const std::string forged = curve_address(split_curve_address(sites[2]->link->address()).endpoint,
                                           outsider_keys.public_key);
  sites[0]->etcd.put(RoundKeys("job").member("c"), encode(MemberRecord{"c", forged, 99, false}));
  // a and b read the members meanwhile (c, not polled, does not write its record again yet).
  const double read_by = seconds_now() + 1;
  while (seconds_now() < read_by)
    for (int i = 0; i < 2; ++i) sites[i]->cross.poll_commit(sites[i]->state, 5ms);
  for (int i = 0; i < 2; ++i) CHECK(sites[i]->cross.known_site(forged) == nullptr);

  // The job still commits, every site on the same bits (c writes its own record again), and no
  // site ever took the forged address for c's.
  for (auto& s : sites) s->submit(0);
  commit_all(sites);
  for (auto& s : sites) {
    CHECK(s->state.version() == 1);
    CHECK(*s->last == *sites[0]->last);
    CHECK(s->cross.known_site(forged) == nullptr);
  }
}

TEST_CASE("over CURVE, a site that sends one peer other bytes than it announced is caught by it, and every site refuses its rounds") {
  EtcdServer etcd;
  // a equivocates towards c: its bytes are authenticated by CURVE and pass c's chunk checks, they
  // just are not the delta a announced (nor what b gets).
  auto victim = std::make_shared<std::string>();  // c's address, once its link is up
  const LinkWrapper lie = [victim](std::unique_ptr<Link> link) -> std::unique_ptr<Link> {
    return std::make_unique<ForgingLink>(std::move(link), [victim](const std::string& address) { return address == *victim; });
  };
  std::map<std::string, std::string> keys;
  auto sites = curve_sites(etcd, keys, {{"a", lie}});
  *victim = sites[2]->link->address();  // before a has sent anything
  Site& a = *sites[0];
  Site& c = *sites[2];
  // Only a's round is out, so no version can be due while c looks at it and asks a for it again.
  a.submit(0);
  std::map<std::string, std::vector<CrossSiteEvent>> events;
  const auto poll = [&](Site& s) {
    CHECK_FALSE(s.cross.poll_commit(s.state, 5ms).has_value());
    for (auto& e : s.cross.take_events()) events[s.name].push_back(std::move(e));
  };
  const auto logged = [&](const std::string& site, const std::string& kind) {
    return std::any_of(events[site].begin(), events[site].end(),
                       [&](const CrossSiteEvent& e) { return e.kind == kind && e.site == "a" && e.number == 0; });
  };
  double deadline = seconds_now() + 10;
  while (!logged("c", "delta_equivocation") && seconds_now() < deadline) {
    poll(a);
    poll(c);
  }
  REQUIRE(logged("c", "delta_equivocation"));
  CHECK(c.cross.traffic().refused.deltas_damaged >= 2);  // the bytes came twice, whole, and were not a's delta
  // The dispute reaches a and b through etcd.
  deadline = seconds_now() + 10;
  while (!(logged("a", "delta_disputed") && logged("b", "delta_disputed")) && seconds_now() < deadline)
    for (auto& s : sites) poll(*s);
  CHECK(logged("a", "delta_disputed"));
  CHECK(logged("b", "delta_disputed"));

  // b and c go on without a: no version waits for a's rounds or merges them, a's next one included.
  for (auto& s : sites) s->submit(s->name == "a" ? 1 : 0);
  commit_all(sites);
  for (auto& s : sites) {
    CHECK(*s->last == *sites[1]->last);
    for (const auto& e : s->last->entries) CHECK(e.site != "a");
  }
  CHECK(sites[1]->last->entries.size() == 2);
  CHECK(sites[1]->last->round_tokens == 2000);  // a's round counts for nothing, not as missing
}

TEST_CASE("synchronous baseline: every site gets the same mean of all sites' gradients") {
  EtcdServer etcd;
  auto sites = joined_sites(etcd, {CodecKind::Fp32, 0});
  for (std::int64_t step = 0; step < 3; ++step) {
    std::vector<std::vector<float>> values(3, std::vector<float>(1000));
    for (int s = 0; s < 3; ++s)
      for (std::size_t i = 0; i < 1000; ++i) values[s][i] = static_cast<float>(s + 1) * 0.1f + static_cast<float>(i + step);
    for (int s = 0; s < 3; ++s) sites[s]->cross.send_gradients(step, values[s]);
    std::vector<bool> done(3);
    const double deadline = seconds_now() + 10;
    while (std::find(done.begin(), done.end(), false) != done.end()) {
      REQUIRE(seconds_now() < deadline);
      for (int s = 0; s < 3; ++s)
        if (!done[s]) done[s] = sites[s]->cross.poll_gradients(step, values[s], 5ms);
    }
    CHECK(values[0] == values[1]);
    CHECK(values[0] == values[2]);
    CHECK(values[0][10] == doctest::Approx(0.2 + 10 + step));
  }
}

TEST_CASE("a member flooding transfers for future rounds is held to a few, the rest refused") {
  EtcdServer etcd;
  auto sites = joined_sites(etcd, {CodecKind::Fp32, 0});
  const std::vector<std::byte> junk(128, std::byte{1});
  for (std::uint64_t round = 100; round < 140; ++round)
    sites[1]->link->send(sites[0]->link->address(), round << 20 | (1 << 16), static_cast<std::uint16_t>(LinkTag::Delta),
                         junk);
  const double deadline = seconds_now() + 5;
  while (sites[0]->cross.traffic().refused.deltas_over_hold_bound < 24 && seconds_now() < deadline)
    sites[0]->cross.poll_commit(sites[0]->state, 5ms);
  CHECK(sites[0]->cross.traffic().refused.deltas_over_hold_bound == 24);
  CHECK(sites[0]->cross.traffic().refused.total() == 24);
  CHECK(sites[0]->state.version() == 0);
}
