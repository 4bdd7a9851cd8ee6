#include <doctest/doctest.h>

#include "sync/round/commit_rule.hpp"

using namespace meridian;

namespace {

DeltaAnnouncement delta(std::string site, std::int64_t round, std::int64_t base, std::int64_t tokens = 100) {
  return {std::move(site), round, base, tokens, 10, 1};
}

}  // namespace

TEST_CASE("due when every live site has announced, entries sorted by site, weights by tokens") {
  CommitView view;
  view.version = 4;
  view.live_sites = {"c", "a", "b"};
  view.announced = {delta("c", 4, 4, 300), delta("a", 4, 4, 100)};
  CHECK_FALSE(decide_commit(view, {}).has_value());
  view.announced.push_back(delta("b", 4, 4, 200));
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
  CHECK_FALSE(decide_commit(view, options).has_value());
  options.quorum = 1;
  CHECK_FALSE(decide_commit(view, options).has_value());
  view.announced.push_back(delta("a", 2, 8));
  const auto entries = decide_commit(view, options);
  REQUIRE(entries.has_value());
  CHECK((*entries)[0].round == 2);
  CHECK((*entries)[0].base_version == 8);
}

TEST_CASE("no live site, nothing due") {
  CommitView view;
  view.announced = {delta("a", 0, 0)};
  CHECK_FALSE(decide_commit(view, {}).has_value());
}
