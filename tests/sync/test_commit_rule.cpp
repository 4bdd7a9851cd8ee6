#include <doctest/doctest.h>

#include "sync/round/commit_rule.hpp"

using namespace meridian;

namespace {

DeltaAnnouncement delta(std::string site, std::int64_t round, std::int64_t base, std::int64_t tokens = 100) {
  return {std::move(site), round, base, tokens, 10, 1};
}

// A view in which every announced delta is here and fine.
void hold_all(CommitView& view) {
  for (const auto& a : view.announced) view.held.insert({a.site, a.round});
}

}  // namespace

TEST_CASE("due when every live site's delta is here, entries sorted by site, weights by tokens") {
  CommitView view;
  view.version = 4;
  view.live_sites = {"c", "a", "b"};
  view.announced = {delta("c", 4, 4, 300), delta("a", 4, 4, 100)};
  hold_all(view);
  CHECK_FALSE(decide_commit(view, {}).has_value());
  view.announced.push_back(delta("b", 4, 4, 200));
  CHECK_FALSE(decide_commit(view, {}).has_value());  // announced, but its bytes are not here yet
  hold_all(view);
  const auto entries = decide_commit(view, {});
  REQUIRE(entries.has_value());
  REQUIRE(entries->size() == 3);
  CHECK((*entries)[0].site == "a");
  CHECK((*entries)[1].site == "b");
  CHECK((*entries)[2].site == "c");
  CHECK((*entries)[0].weight == 100);
  CHECK((*entries)[2].weight == 300);
}

TEST_CASE("a quorum below the live sites commits without the rest") {
  CommitView view;
  view.version = 0;
  view.live_sites = {"a", "b", "c"};
  view.announced = {delta("a", 0, 0), delta("b", 0, 0)};
  hold_all(view);
  CHECK_FALSE(decide_commit(view, {}).has_value());
  CommitRuleOptions two;
  two.quorum = 2;
  const auto entries = decide_commit(view, two);
  REQUIRE(entries.has_value());
  CHECK(entries->size() == 2);
}

TEST_CASE("merged rounds are never listed again, a site contributes its oldest unmerged round") {
  CommitView view;
  view.version = 5;
  view.live_sites = {"a"};
  view.applied = {{"a", 3}};
  view.announced = {delta("a", 3, 4), delta("a", 5, 5), delta("a", 4, 4)};
  hold_all(view);
  const auto entries = decide_commit(view, {});
  REQUIRE(entries.has_value());
  REQUIRE(entries->size() == 1);
  CHECK((*entries)[0].round == 4);
  CHECK((*entries)[0].weight == doctest::Approx(100.0 / 2));  // one version stale: 1 / (1 + 1)
}

TEST_CASE("too stale, from the future or with negative tokens: not a candidate") {
  CommitView view;
  view.version = 10;
  view.live_sites = {"a", "b", "c"};
  CommitRuleOptions options;
  options.staleness.max_staleness = 2;
  view.announced = {delta("a", 1, 7), delta("b", 1, 11), delta("c", 1, 10, -5)};
  hold_all(view);
  CHECK_FALSE(decide_commit(view, options).has_value());
  options.quorum = 1;
  CHECK_FALSE(decide_commit(view, options).has_value());
  view.announced.push_back(delta("a", 2, 8));
  hold_all(view);
  const auto entries = decide_commit(view, options);
  REQUIRE(entries.has_value());
  CHECK((*entries)[0].round == 2);
  CHECK((*entries)[0].base_version == 8);
}

TEST_CASE("no live site, nothing due") {
  CommitView view;
  view.announced = {delta("a", 0, 0)};
  hold_all(view);
  CHECK_FALSE(decide_commit(view, {}).has_value());
}

TEST_CASE("a dead site's deltas wait for its return, the live ones commit without it") {
  CommitView view;
  view.live_sites = {"a", "c"};
  view.announced = {delta("a", 0, 0), delta("b", 0, 0), delta("c", 0, 0)};
  hold_all(view);
  const auto entries = decide_commit(view, {});
  REQUIRE(entries.has_value());
  REQUIRE(entries->size() == 2);
  CHECK((*entries)[0].site == "a");
  CHECK((*entries)[1].site == "c");
}

TEST_CASE("a refused delta is never listed, the site's next round is") {
  CommitView view;
  view.live_sites = {"a", "b"};
  view.announced = {delta("a", 0, 0), delta("b", 0, 0)};
  hold_all(view);
  view.refused = {{"b", 0}};
  CHECK_FALSE(decide_commit(view, {}).has_value());  // b offers nothing it could merge yet
  view.announced.push_back(delta("b", 1, 0));
  hold_all(view);
  const auto entries = decide_commit(view, {});
  REQUIRE(entries.has_value());
  REQUIRE(entries->size() == 2);
  CHECK((*entries)[1].site == "b");
  CHECK((*entries)[1].round == 1);
}

TEST_CASE("once the deadline passes the held deltas commit without the late site") {
  CommitView view;
  view.version = 2;
  view.live_sites = {"a", "b", "c"};
  view.announced = {delta("a", 2, 2), delta("b", 2, 2), delta("c", 2, 2)};
  view.held = {{"a", 2}, {"c", 2}};
  view.first_held_at = 10.0;
  view.now = 11.0;
  CHECK_FALSE(decide_commit(view, {}).has_value());  // no deadline known: the quorum only
  view.deadline_s = 1.5;
  CHECK_FALSE(decide_commit(view, {}).has_value());
  view.now = 11.5;
  const auto entries = decide_commit(view, {});
  REQUIRE(entries.has_value());
  REQUIRE(entries->size() == 2);
  CHECK((*entries)[0].site == "a");
  CHECK((*entries)[1].site == "c");
  view.held.clear();
  CHECK_FALSE(decide_commit(view, {}).has_value());  // a deadline with nothing here commits nothing
}

TEST_CASE("streaming: a version merges one fragment, the expected one when offered, else the oldest offer's") {
  CommitRuleOptions four;
  four.fragments = 4;
  const auto frag = [](DeltaAnnouncement a, int f) {
    a.fragment = f;
    return a;
  };
  CommitView view;
  view.version = 5;
  view.next_fragment = 1;
  view.live_sites = {"a", "b"};
  // b's open round is fragment 2: in order, it cannot take part; a's fragment 1 is not held back by it.
  view.announced = {frag(delta("a", 5, 5, 100), 1), frag(delta("b", 5, 5, 100), 2)};
  hold_all(view);
  CHECK(commit_fragment(view, open_offers(view, four)) == 1);
  auto entries = decide_commit(view, four);
  REQUIRE(entries.has_value());
  REQUIRE(entries->size() == 1);
  CHECK((*entries)[0].site == "a");
  // b has nothing open yet: it may still announce fragment 1, so the version waits for it.
  view.announced = {frag(delta("a", 5, 5, 100), 1)};
  CHECK_FALSE(decide_commit(view, four).has_value());
  // Nobody offers the expected fragment: the oldest offer's fragment is merged rather than nothing.
  view.next_fragment = 3;
  view.announced = {frag(delta("a", 5, 5, 100), 1), frag(delta("b", 5, 4, 100), 2)};
  hold_all(view);
  CHECK(commit_fragment(view, open_offers(view, four)) == 2);
  entries = decide_commit(view, four);
  REQUIRE(entries.has_value());
  REQUIRE(entries->size() == 1);
  CHECK((*entries)[0].site == "b");
  view.next_fragment = -1;  // the newest version's fragment unknown: the same
  CHECK(commit_fragment(view, open_offers(view, four)) == 2);
  // Staleness counts about one version in four: a delta 4 versions old missed one commit of its fragment.
  view.next_fragment = 1;
  view.announced = {frag(delta("a", 5, 4, 100), 1), frag(delta("b", 5, 1, 100), 1)};
  hold_all(view);
  entries = decide_commit(view, four);
  REQUIRE(entries.has_value());
  REQUIRE(entries->size() == 2);
  CHECK((*entries)[0].weight == 100);
  CHECK((*entries)[1].weight == 50);
  // A fragment the job does not have is no offer, and a site's rounds merge in order.
  view.announced = {frag(delta("a", 5, 5, 100), 4), frag(delta("a", 6, 5, 100), 1)};
  hold_all(view);
  const auto offers = open_offers(view, four);
  REQUIRE(offers.contains("a"));
  CHECK(offers.at("a").round == 6);
  view.live_sites = {"a"};
  view.announced = {frag(delta("a", 5, 5, 100), 2), frag(delta("a", 6, 5, 100), 1)};
  hold_all(view);
  entries = decide_commit(view, four);  // a's round 5 (fragment 2) comes first, whatever is expected
  REQUIRE(entries.has_value());
  CHECK((*entries)[0].round == 5);
}
