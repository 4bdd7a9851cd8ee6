// The site agent's membership rules, as a pure function of (now, current generation, replicas).
#include <doctest/doctest.h>

#include "intrasite/group/membership.hpp"

using namespace meridian;

namespace {

ReplicaView up(int id, double hb = 100) { return ReplicaView{id, true, false, hb, std::nullopt}; }
ReplicaView ready(int id, double hb = 100) { return ReplicaView{id, true, true, hb, std::nullopt}; }

const MembershipOptions kOpts{10.0, 2.0, 1};

}  // namespace

TEST_CASE("the first generation forms once enough replicas are ready") {
  const Generation none;
  MembershipOptions all3 = kOpts;
  all3.min_members = 3;
  CHECK_FALSE(decide_membership(100, none, {ready(0), ready(1), up(2)}, all3).next);
  const auto d = decide_membership(100, none, {ready(0), ready(1), ready(2)}, all3);
  REQUIRE(d.next);
  CHECK(*d.next == Generation{0, {0, 1, 2}});
}

TEST_CASE("a healthy group is left alone") {
  const Generation g{4, {0, 1, 2}};
  const auto d = decide_membership(105, g, {up(0), up(1), up(2)}, kOpts);
  CHECK_FALSE(d.next);
  CHECK(d.evict.empty());
}

TEST_CASE("a member whose process died is dropped at once") {
  const Generation g{4, {0, 1, 2}};
  auto dead = up(1);
  dead.running = false;
  const auto d = decide_membership(101, g, {up(0), dead, up(2)}, kOpts);
  REQUIRE(d.next);
  CHECK(*d.next == Generation{5, {0, 2}});
  CHECK(d.reason.find("lost [1]") != std::string::npos);
}

TEST_CASE("a hung member (silent heartbeat) is evicted and dropped") {
  const Generation g{2, {0, 1, 2}};
  const auto d = decide_membership(120, g, {up(0, 119), up(1, 105), up(2, 119)}, kOpts);
  CHECK(d.evict == std::vector<int>{1});
  REQUIRE(d.next);
  CHECK(d.next->members == std::vector<int>{0, 2});
}

TEST_CASE("a replica not beating yet gets the first-beat timeout from its start, then the usual one") {
  const Generation g{2, {0, 1}};
  ReplicaView starting = up(1, 100);
  starting.beating = false;
  // 25 s after its start: past a heartbeat timeout, within the first beat's 30 s.
  auto d = decide_membership(125, g, {up(0, 124), starting}, kOpts);
  CHECK(d.evict.empty());
  CHECK_FALSE(d.next);
  d = decide_membership(131, g, {up(0, 130), starting}, kOpts);
  CHECK(d.evict == std::vector<int>{1});
  // Once it has beaten, the heartbeat timeout applies.
  d = decide_membership(125, g, {up(0, 124), up(1, 100)}, kOpts);
  CHECK(d.evict == std::vector<int>{1});
  CHECK(allowed_silence(false, kOpts) == 30);
  MembershipOptions short_start = kOpts;
  short_start.first_beat_timeout_s = 5;
  CHECK(allowed_silence(false, short_start) == 10);  // never less than a heartbeat timeout
}

TEST_CASE("after a failed collective: wait for the members' reports, then drop the silent ones") {
  const Generation g{7, {0, 1, 2}};
  auto r0 = up(0), r1 = up(1), r2 = up(2);
  r0.failed_at = 100.0;
  // Within the grace period, member 2 has not reported yet: no decision.
  CHECK_FALSE(decide_membership(101, g, {r0, r1, r2}, kOpts).next);
  // All running members reported: regroup at once, all of them (nobody was at fault from here).
  r1.failed_at = 100.5;
  r2.failed_at = 100.7;
  auto all = decide_membership(101, g, {r0, r1, r2}, kOpts);
  REQUIRE(all.next);
  CHECK(all.next->members == std::vector<int>{0, 1, 2});
  // Grace over and member 2 still silent: it is evicted and the reporters go on.
  r2.failed_at.reset();
  auto d = decide_membership(102.5, g, {r0, r1, r2}, kOpts);
  REQUIRE(d.next);
  CHECK(d.next->members == std::vector<int>{0, 1});
  CHECK(d.evict == std::vector<int>{2});
}

TEST_CASE("a restarted replica that is ready joins at the next generation") {
  const Generation g{5, {0, 2}};
  const auto d = decide_membership(105, g, {up(0), ready(1), up(2)}, kOpts);
  REQUIRE(d.next);
  CHECK(*d.next == Generation{6, {0, 1, 2}});
  CHECK(d.reason.find("joining [1]") != std::string::npos);
}

TEST_CASE("below min_members the site waits instead of forming a group") {
  const Generation g{3, {0, 1}};
  auto dead = up(1);
  dead.running = false;
  MembershipOptions two = kOpts;
  two.min_members = 2;
  const auto d = decide_membership(100, g, {up(0), dead}, two);
  CHECK_FALSE(d.next);
  CHECK(d.reason.find("waiting") != std::string::npos);
}
