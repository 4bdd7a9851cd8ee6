// Streaming DiLoCo over the cross-site protocol (cross_site_fixture.hpp, a real etcd): each
// exchange moves one fragment, the versions change the fragments in turn, and every site holds the
// same bits for every version.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <memory>
#include <vector>

#include "tests/crosssite/cross_site_fixture.hpp"

using namespace meridian;
using namespace meridian::testing;

namespace {

constexpr int kFragments = 4;

// kParams as 8 tensors of equal size, fragment f holding tensors f and f + 4 (strided, as
// plan_fragments strides a model's layers).
FragmentPlan strided_plan() {
  constexpr std::size_t kTensor = kParams / 8;
  FragmentPlan plan(kFragments);
  for (std::size_t t = 0; t < 8; ++t) {
    auto& f = plan[t % kFragments];
    f.ranges.push_back({t * kTensor, kTensor});
    f.size += kTensor;
  }
  return plan;
}

struct Exchange {
  // Per exchange, what the first site sent (to both peers), less the deltas it sent again because
  // a peer, slow to take them in on a busy machine, asked for them (rerequest_after is 50 ms).
  std::vector<std::uint64_t> bytes;
  std::uint64_t peak_in_flight = 0;
};

// `exchanges` lockstep exchanges of three sites: every site sends the due fragment's delta, then all
// apply the next version. Checks versions, fragments and hashes on the way.
Exchange run(const EtcdServer& etcd, int fragments, int exchanges) {
  CommitRuleOptions rule;
  rule.fragments = fragments;
  auto sites = joined_sites(etcd, {CodecKind::Int8, 256}, {}, 16 << 10, rule,
                            fragments == 1 ? FragmentPlan{} : strided_plan());
  Exchange out;
  std::map<std::int64_t, std::uint64_t> hash_of_version;
  for (int round = 0; round < exchanges; ++round) {
    const auto before = sites[0]->cross.traffic();
    for (auto& s : sites) s->submit(round, {}, {}, round % fragments);
    commit_all(sites);
    const auto after = sites[0]->cross.traffic();
    out.bytes.push_back((after.bytes_sent - before.bytes_sent) - (after.bytes_resent - before.bytes_resent));
    for (auto& s : sites) {
      REQUIRE(s->last.has_value());
      CHECK(s->state.version() == round + 1);
      CHECK(s->last->number == round + 1);
      CHECK(s->last->entries.size() == 3);
      CHECK(s->last->fragment == round % fragments);
      for (const auto& e : s->last->entries) {
        CHECK(e.fragment == round % fragments);
        CHECK(e.weight == 1000);  // fresh
      }
      const auto h = OuterState::weights_hash(s->state.global());
      CHECK(h == s->last->params_hash);
      CHECK(hash_of_version.try_emplace(s->state.version(), h).first->second == h);
    }
  }
  for (auto& s : sites) CHECK(s->cross.traffic().refused.total() == 0);
  out.peak_in_flight = sites[0]->cross.traffic().peak_bytes_in_flight;
  // One commit per version in etcd, versions 1..exchanges.
  const auto log = sites[0]->etcd.get_prefix(RoundKeys("job").commits());
  CHECK(log.size() == static_cast<std::size_t>(exchanges));
  return out;
}

}  // namespace

TEST_CASE("streaming, P = 4: each exchange moves a quarter of a DiLoCo exchange, every site ends on the same bits") {
  Exchange diloco, streaming;
  {
    EtcdServer etcd;
    diloco = run(etcd, 1, 2);
  }
  {
    EtcdServer etcd;
    streaming = run(etcd, kFragments, 2 * kFragments);  // every fragment twice
  }
  REQUIRE(diloco.bytes.size() == 2);
  const double whole = static_cast<double>(diloco.bytes[0]);
  CHECK(whole >= 2.0 * kParams);  // int8: a byte per parameter, to two peers
  for (const auto b : streaming.bytes) {
    CAPTURE(b);
    CHECK(static_cast<double>(b) / whole == doctest::Approx(1.0 / kFragments).epsilon(0.02));
  }
  CHECK(static_cast<double>(streaming.peak_in_flight) / static_cast<double>(diloco.peak_in_flight) ==
        doctest::Approx(1.0 / kFragments).epsilon(0.02));
}

TEST_CASE("streaming: a round cut from its version goes into the next one, and its site is back in turn") {
  EtcdServer etcd;
  CommitRuleOptions rule;
  rule.fragments = kFragments;
  rule.quorum = 2;  // a and b make a version without c
  auto sites = joined_sites(etcd, {CodecKind::Fp32, 0}, {}, 16 << 10, rule, strided_plan());
  Site& c = *sites[2];
  for (int i = 0; i < 2; ++i) sites[i]->submit(0, {}, {}, 0);
  commit_all(sites);
  CHECK(sites[0]->last->entries.size() == 2);
  // c's fragment 0 comes late, then its fragment 1; a and b go on with fragment 1. c's deltas are
  // held everywhere before theirs, so whoever proposes version 2 lists both.
  c.submit(0, {}, {}, 0);
  c.submit(1, {}, {}, 1);
  for (int i = 0; i < 50; ++i)
    for (auto& s : sites) CHECK_FALSE(s->cross.poll_commit(s->state, 1ms).has_value());
  for (int i = 0; i < 2; ++i) sites[i]->submit(1, {}, {}, 1);
  commit_all(sites);
  CHECK(sites[0]->last->fragment == 1);
  std::vector<std::tuple<std::string, std::int64_t, int>> listed;
  for (const auto& e : sites[0]->last->entries) {
    listed.emplace_back(e.site, e.round, e.fragment);
    CHECK(e.weight == 1000);  // one version late: not a commit of its own fragment late
  }
  CHECK(std::count(listed.begin(), listed.end(), std::tuple<std::string, std::int64_t, int>{"c", 0, 0}) == 1);
  CHECK(std::count(listed.begin(), listed.end(), std::tuple<std::string, std::int64_t, int>{"c", 1, 1}) == 1);
  // From here on c is in turn: version 3 is fragment 2 from all three.
  for (auto& s : sites) s->submit(2, {}, {}, 2);
  commit_all(sites);
  CHECK(sites[0]->last->fragment == 2);
  for (auto& s : sites) {
    CHECK(s->state.version() == 3);
    CHECK(OuterState::weights_hash(s->state.global()) == sites[0]->last->params_hash);
  }
}
