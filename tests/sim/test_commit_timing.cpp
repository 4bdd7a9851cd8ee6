#include <doctest/doctest.h>

#include "sim/des/commit_timing.hpp"

using namespace meridian::sim;

namespace {
PendingDelta delta(int site, std::vector<double> arrive) { return {site, std::move(arrive)}; }
}  // namespace

TEST_CASE("all: due when the proposer that holds every needed site's delta first holds it") {
  // Site 0's delta reaches 1 at 5 and 2 at 9; site 1's reaches 0 at 4 and 2 at 6; site 2 has none yet.
  std::vector<PendingDelta> pending{delta(0, {1, 5, 9}), delta(1, {4, 2, 6})};
  const std::vector<char> up{1, 1, 1};
  CHECK(plan_commit(pending, {1, 1, 1}, up, {}).t == kNever);  // site 2 is needed and silent
  const auto plan = plan_commit(pending, {1, 1, 0}, up, {});
  CHECK(plan.t == 4);  // site 0 holds both at 4, site 1 at 5, site 2 at 9
  CHECK(plan.proposer == 0);
  CHECK(plan_commit(pending, {1, 1, 0}, {0, 1, 1}, {}).t == 5);  // site 0 cannot propose
}

TEST_CASE("quorum: the q-th needed site's delta, a deadline after the first one held") {
  std::vector<PendingDelta> pending{delta(0, {1, 5, 9}), delta(1, {4, 2, 6})};
  const std::vector<char> up{1, 1, 1}, needed{1, 1, 1};
  CHECK(plan_commit(pending, needed, up, {.all = true, .quorum = 2}).t == 4);
  CHECK(plan_commit(pending, needed, up, {.all = true, .quorum = 1}).t == 1);
  const auto late = plan_commit(pending, needed, up, {.all = true, .quorum = 0, .deadline_s = 10});
  CHECK(late.t == 11);  // site 0 held its own delta first, at 1
  CHECK(plan_commit(std::vector<PendingDelta>{}, needed, up, {.all = true, .quorum = 1, .deadline_s = 1}).t == kNever);
}

TEST_CASE("a site's earliest pending delta is the one that counts") {
  std::vector<PendingDelta> pending{delta(0, {3, 8}), delta(0, {7, 4}), delta(1, {5, 1})};
  const auto plan = plan_commit(pending, {1, 1}, {1, 1}, {});
  CHECK(plan.t == 4);  // site 1 holds site 0's second delta at 4 and its own at 1
  CHECK(plan.proposer == 1);
}
