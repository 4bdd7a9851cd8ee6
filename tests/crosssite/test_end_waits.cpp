// The bounded waits at a site's end of the job (crosssite/round/end_waits.hpp).
#include <doctest/doctest.h>

#include "crosssite/round/end_waits.hpp"

namespace meridian {
namespace {

std::map<std::string, MemberRecord> members(std::int64_t a_ended, std::int64_t b_ended, std::int64_t c_ended) {
  return {{"a", {"a", "tcp://a", 1, false, a_ended}},
          {"b", {"b", "tcp://b", 1, false, b_ended}},
          {"c", {"c", "tcp://c", 1, false, c_ended}}};
}

}  // namespace

TEST_CASE("end waits: a done site waits for the live peers that have not ended, for at most kPeersEnd_s") {
  EndWaits ends;
  auto p = ends.peers(100, members(7, -1, -1), "a");
  CHECK(p.waited_for == std::vector<std::string>{"b", "c"});
  CHECK_FALSE(p.gave_up);
  p = ends.peers(110, members(7, 7, -1), "a");  // b ended; c (behind, say) not yet
  CHECK(p.waited_for == std::vector<std::string>{"c"});
  CHECK_FALSE(p.gave_up);
  // The clock runs from the first call, not from the latest.
  p = ends.peers(100 + EndWaits::kPeersEnd_s - 0.01, members(7, 7, -1), "a");
  CHECK_FALSE(p.gave_up);
  p = ends.peers(100 + EndWaits::kPeersEnd_s, members(7, 7, -1), "a");
  CHECK(p.waited_for == std::vector<std::string>{"c"});
  CHECK(p.gave_up);
}

TEST_CASE("end waits: peers that ended, on any version, or left are not waited for, nor is the site itself") {
  EndWaits ends;
  CHECK(ends.peers(0, members(-1, 7, 5), "a").waited_for.empty());  // a's own record may lag its own write
  CHECK(ends.peers(0, {{"a", {"a", "tcp://a", 1, false, 7}}}, "a").waited_for.empty());
  // Nobody left to wait for is never "giving up", however late.
  const auto late = ends.peers(1e6, members(7, 7, 7), "a");
  CHECK(late.waited_for.empty());
  CHECK_FALSE(late.gave_up);
}

TEST_CASE("end waits: a site left alone waits kInFlightGrace_s for deltas on their way, from its first look") {
  EndWaits ends;
  CHECK(ends.in_flight(50));
  CHECK(ends.in_flight(50 + EndWaits::kInFlightGrace_s - 0.01));
  CHECK_FALSE(ends.in_flight(50 + EndWaits::kInFlightGrace_s));
}

TEST_CASE(
    "end waits: a done site cut off from the control plane ends after the bound, counted from the first look without "
    "it") {
  EndWaits ends;
  CHECK_FALSE(ends.cut_off(10, true, 30));
  CHECK_FALSE(ends.cut_off(20, false, 30));  // the first look that finds it away
  CHECK_FALSE(ends.cut_off(49.99, false, 30));
  CHECK_FALSE(ends.ended_cut_off());
  // It answered once in between: the count starts again.
  CHECK_FALSE(ends.cut_off(50, true, 30));
  CHECK_FALSE(ends.cut_off(60, false, 30));
  CHECK_FALSE(ends.cut_off(89.99, false, 30));
  CHECK(ends.cut_off(90, false, 30));
  CHECK(ends.ended_cut_off());
}

TEST_CASE("end waits: with no bound a done site waits for the control plane however long it stays away") {
  EndWaits ends;
  CHECK_FALSE(ends.cut_off(0, false, 0));
  CHECK_FALSE(ends.cut_off(1e9, false, 0));
  CHECK_FALSE(ends.ended_cut_off());
}

}  // namespace meridian
