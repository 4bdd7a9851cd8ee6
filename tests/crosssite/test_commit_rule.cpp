#include <doctest/doctest.h>

#include "crosssite/round/commit_rule.hpp"

using namespace meridian;

namespace {

DeltaAnnouncement delta(std::string site, std::int64_t round, std::int64_t base, std::int64_t tokens = 100) {
  return {std::move(site), round, base, tokens, 10, Digest{std::byte{1}}};
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

TEST_CASE("a delta spanning paused rounds weighs as one round's tokens") {
  CommitView view;
  view.version = 4;
  view.live_sites = {"a", "b"};
  view.announced = {delta("a", 4, 4, 100), delta("b", 1, 4, 3700)};
  view.announced[1].rounds = 37;
  hold_all(view);
  const auto entries = decide_commit(view, {});
  REQUIRE(entries.has_value());
  REQUIRE(entries->size() == 2);
  CHECK((*entries)[0].weight == 100);
  CHECK((*entries)[1].weight == 100);
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

TEST_CASE("every site's round refused: no version can come until the sites announce again") {
  CommitView view;
  view.version = 7;
  view.live_sites = {"a", "b", "c"};
  view.applied = {{"a", 6}, {"b", 6}, {"c", 6}};
  view.announced = {delta("a", 7, 7), delta("b", 7, 7), delta("c", 7, 7)};
  hold_all(view);
  view.refused = {{"a", 7}, {"b", 7}};
  CHECK_FALSE(every_offer_refused(view, {}));  // c's round is open: a version can merge it
  view.refused.insert({"c", 7});
  CHECK(every_offer_refused(view, {}));
  CHECK_FALSE(decide_commit(view, {}).has_value());

  // A site that has not announced on this version yet may still offer a round a version can take.
  view.announced.pop_back();
  view.refused.erase({"c", 7});
  CHECK_FALSE(every_offer_refused(view, {}));
  // Unless it announces nothing new: paused, or its final round is behind it.
  view.paused = {"c"};
  CHECK(every_offer_refused(view, {}));
  view.paused.clear();
  view.finished = {"c"};
  CHECK(every_offer_refused(view, {}));

  // A refused round on an older version says nothing about this one.
  view.finished.clear();
  view.announced.push_back(delta("c", 6, 6));
  view.applied["c"] = 5;
  view.refused.insert({"c", 6});
  CHECK_FALSE(every_offer_refused(view, {}));

  CommitView empty;
  CHECK_FALSE(every_offer_refused(empty, {}));  // no live site: nothing to say
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

TEST_CASE("a full round counts every site that trains on or has finished, not one whose lease lapsed") {
  CommitView view;
  view.live_sites = {"a", "b", "p"};
  view.paused = {"p"};
  view.finished = {"f"};
  view.round_tokens = {{"a", 100}, {"b", 200}, {"p", 400}, {"f", 800}, {"gone", 1600}};
  const std::vector<CommitEntry> a_only{{"a", 3, 3, 100, Digest{}}};
  CHECK(full_round_tokens(view, a_only) == 100 + 200 + 800);  // p paused, "gone" not live
  const std::vector<CommitEntry> with_p{{"a", 3, 3, 100, Digest{}}, {"p", 3, 3, 400, Digest{}}};
  CHECK(full_round_tokens(view, with_p) == 100 + 200 + 400 + 800);  // a paused site's round before its pause counts
  view.live_sites.push_back("new");  // nothing announced yet: nothing known to count
  CHECK(full_round_tokens(view, a_only) == 100 + 200 + 800);
  view.paused.insert("f");  // finished, and caught equivocating: its rounds were refused, it counts for nothing
  CHECK(full_round_tokens(view, a_only) == 100 + 200);
}

TEST_CASE("a commit moves the weights by its share of a full round: missing sites count as zero, stale deltas less") {
  const CommitRuleOptions rule;  // inverse decay
  const std::vector<CommitEntry> one{{"a", 5, 5, 100, Digest{}}};
  CHECK(commit_share(6, one, 0, rule) == 1.0);    // no full round given: the mean of what it has
  CHECK(commit_share(6, one, 100, rule) == 1.0);  // it is the whole round
  CHECK(commit_share(6, one, 300, rule) == doctest::Approx(1.0 / 3));
  // b's delta is a version late (weight 100 / 2): half of it counts, with or without the full round.
  const std::vector<CommitEntry> late{{"a", 5, 5, 100, Digest{}}, {"b", 4, 4, 50, Digest{}}};
  CHECK(commit_share(6, late, 0, rule) == doctest::Approx(150.0 / 200));
  CHECK(commit_share(6, late, 300, rule) == doctest::Approx(150.0 / 300));
  // A record that lists a delta beyond max_staleness (no site proposes one) is read at its weight.
  const std::vector<CommitEntry> ancient{{"a", 1, 0, 100, Digest{}}};
  CHECK(commit_share(20, ancient, 300, rule) == doctest::Approx(1.0 / 3));
  CHECK(commit_share(6, {}, 0, rule) == 1.0);
}

TEST_CASE("a paused site holds a commit back only with a round it announced before the pause") {
  CommitView view;
  view.version = 3;
  view.live_sites = {"a", "b", "c"};
  view.paused = {"c"};
  view.announced = {delta("a", 3, 3), delta("b", 3, 3)};
  hold_all(view);
  // c announces nothing while paused: a and b's deltas are the whole version, no deadline needed.
  auto entries = decide_commit(view, {});
  REQUIRE(entries.has_value());
  CHECK(entries->size() == 2);
  CHECK(awaited_sites(view, open_rounds(view, {}), 0) == 2);
  // A round c announced before its pause is open: the version waits for its bytes, then merges it.
  view.announced.push_back(delta("c", 2, 3));
  CHECK(awaited_sites(view, open_rounds(view, {}), 0) == 3);
  CHECK_FALSE(decide_commit(view, {}).has_value());
  hold_all(view);
  entries = decide_commit(view, {});
  REQUIRE(entries.has_value());
  CHECK(entries->size() == 3);
  // Streaming: a paused site is not waited for to announce the turn's fragment.
  CommitRuleOptions two;
  two.fragments = 2;
  view.announced = {delta("a", 4, 3), delta("b", 4, 3)};
  for (auto& a : view.announced) a.fragment = 0;
  view.next_fragment = 1;
  CHECK(commit_fragment(view, open_rounds(view, two)) == 0);
  view.paused.clear();
  CHECK(commit_fragment(view, open_rounds(view, two)) == 1);  // c may still announce fragment 1
}

TEST_CASE("a site whose final round is merged is not waited for: the others' rounds commit without it") {
  // Seen with a bounded overlap and a slower site's shorter rounds: a had ended, its final round
  // merged, and stayed live waiting for b's final round; b's next round waited for a's delta,
  // which would never come, and b waited for that round's commit: neither moved again.
  CommitView view;
  view.version = 5;
  view.live_sites = {"a", "b"};
  view.applied = {{"a", 3}, {"b", 4}};
  view.announced = {delta("a", 3, 4), delta("b", 5, 5)};
  view.announced[0].final = true;
  view.finished = {"a"};
  hold_all(view);
  CHECK(awaited_sites(view, open_rounds(view, {}), 0) == 1);
  const auto entries = decide_commit(view, {});
  REQUIRE(entries.has_value());
  REQUIRE(entries->size() == 1);
  CHECK((*entries)[0].site == "b");
  // Its final round still open: it is waited for, as any site with a round to merge.
  view.applied["a"] = 2;
  CHECK(awaited_sites(view, open_rounds(view, {}), 0) == 2);
}

TEST_CASE("streaming: a version is one fragment's turn, a site whose round was cut adds it and is back in turn") {
  CommitRuleOptions four;
  four.fragments = 4;
  const auto frag = [](DeltaAnnouncement a, int f) {
    a.fragment = f;
    return a;
  };
  CommitView view;
  view.version = 5;
  view.next_fragment = 2;
  view.live_sites = {"a", "b"};
  // b's round of fragment 1 was cut from version 5: it goes into version 6 with b's and a's fragment 2.
  view.announced = {frag(delta("a", 6, 5, 100), 2), frag(delta("b", 5, 4, 100), 1), frag(delta("b", 6, 4, 100), 2)};
  hold_all(view);
  CHECK(commit_fragment(view, open_rounds(view, four)) == 2);
  auto entries = decide_commit(view, four);
  REQUIRE(entries.has_value());
  REQUIRE(entries->size() == 3);
  CHECK(((*entries)[0].site == "a" && (*entries)[0].fragment == 2));
  CHECK(((*entries)[1].site == "b" && (*entries)[1].round == 5 && (*entries)[1].fragment == 1));
  CHECK(((*entries)[2].site == "b" && (*entries)[2].round == 6 && (*entries)[2].fragment == 2));
  CHECK((*entries)[1].weight == 100);  // one version late: about a quarter of a commit of its fragment, none counted
  // Without b's round of the turn, b is not ready: the version waits for it (or the deadline).
  view.announced.pop_back();
  CHECK_FALSE(decide_commit(view, four).has_value());
  // Nobody has the expected fragment and nobody may still announce it (a announced its last
  // round): the oldest open round's fragment is merged rather than nothing.
  view.next_fragment = 3;
  view.finished = {"a"};
  CHECK(commit_fragment(view, open_rounds(view, four)) == 1);
  view.finished.clear();
  view.live_sites = {"a", "b", "c"};  // c has nothing open and may still announce fragment 3
  CHECK(commit_fragment(view, open_rounds(view, four)) == 3);
  // Four versions late, a delta missed about one commit of its own fragment.
  view.live_sites = {"b"};
  view.next_fragment = 1;
  view.version = 8;
  entries = decide_commit(view, four);
  REQUIRE(entries.has_value());
  CHECK((*entries)[0].weight == 50);
  // A fragment the job does not have is no offer.
  view.announced = {frag(delta("b", 6, 5, 100), 4), frag(delta("b", 7, 5, 100), 1)};
  CHECK(open_offers(view, four).at("b").round == 7);
}

TEST_CASE("mergeable: withdrawn, refused, merged, of no fragment, newer than the version, too stale or with negative tokens is not") {
  CommitView view;
  view.version = 4;
  view.applied = {{"a", 2}};
  view.refused = {{"a", 5}};
  const CommitRuleOptions rule;
  CHECK(mergeable(delta("a", 3, 4), view, rule));
  CHECK_FALSE(mergeable(delta("a", 2, 4), view, rule));  // merged
  CHECK_FALSE(mergeable(delta("a", 5, 4), view, rule));  // refused
  auto withdrawn = delta("a", 6, 4);
  withdrawn.withdrawn = true;
  CHECK_FALSE(mergeable(withdrawn, view, rule));
  auto elsewhere = delta("a", 7, 4);
  elsewhere.fragment = 1;
  CHECK_FALSE(mergeable(elsewhere, view, rule));
  CHECK_FALSE(mergeable(delta("a", 8, 5), view, rule));      // based on a version nobody committed
  CHECK_FALSE(mergeable(delta("a", 9, 4, -1), view, rule));  // negative tokens
  auto stale = delta("a", 10, 4 - rule.staleness.max_staleness - 1);
  CHECK_FALSE(mergeable(stale, view, rule));
  CHECK(mergeable(delta("a", 11, 4 - rule.staleness.max_staleness), view, rule));
}
