// Stated fault scenarios in the protocol simulator: the protocol's answers to a crashed site, a
// partitioned one and a straggler, judged by what the commit log says and when (virtual time).
// These were multi-process tests against real etcd that took a minute each; the wiring itself
// keeps its smoke tests (tests/sites/test_site_faults.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <optional>
#include <string>

#include "sim/protocol/protocol_sim.hpp"

namespace meridian {
namespace {

constexpr double kLeaseTtl = 2, kRound = 1;  // the simulator's job (SimOptions, protocol_sim.cpp)

SimOptions scenario(Fault fault) {
  SimOptions options;
  options.trace = true;
  options.plan = std::vector<Fault>{fault};
  return options;
}

Fault fault(Fault::Kind kind, int site, double at, double duration, double amount = 0) {
  Fault f;
  f.kind = kind;
  f.site = site;
  f.at = at;
  f.duration = duration;
  f.amount = amount;
  return f;
}

bool merges(const SimCommit& c, const std::string& site) {
  return std::any_of(c.record.entries.begin(), c.record.entries.end(), [&](const CommitEntry& e) { return e.site == site; });
}

// The longest wait between two versions that committed in [from, to] (and the one before from).
double longest_gap(const SimOutcome& o, double from, double to) {
  double gap = 0, last = -1;
  for (const auto& c : o.history) {
    if (c.at > to) break;
    if (last >= 0 && c.at >= from) gap = std::max(gap, c.at - last);
    last = c.at;
  }
  return gap;
}

bool traced(const SimOutcome& o, const std::string& what) {
  return std::any_of(o.trace.begin(), o.trace.end(), [&](const std::string& l) { return l.find(what) != std::string::npos; });
}

std::string report(const SimOutcome& o) {
  std::string s = "seed " + std::to_string(o.seed) + (o.overlap ? " (overlap)" : " (lockstep)") + ":";
  for (const auto& v : o.violations) s += "\n  " + v;
  for (const auto& c : o.history) {
    s += "\n  v" + std::to_string(c.record.number) + " at " + std::to_string(c.at) + " by " + c.record.proposer + ":";
    for (const auto& e : c.record.entries) s += " " + e.site + std::to_string(e.round);
  }
  return s;
}

// When `site` finished (its trace line), or -1 if it did not.
double finished_at(const SimOutcome& o, const std::string& site) {
  for (const auto& l : o.trace)
    if (l.find(" " + site + ": finished at version ") != std::string::npos) return std::stod(l);
  return -1;
}

}  // namespace

TEST_CASE("scenario: a crashed site, with or without its disk, is left behind within a lease, then rejoins the commits") {
  constexpr double kAt = 6, kDown = 6;
  for (const double lose_disk : {0.0, 1.0})
    for (std::uint64_t seed = 0; seed < 8; ++seed) {
      const auto o = simulate(seed, scenario(fault(Fault::Kind::Crash, 2, kAt, kDown, lose_disk)));
      INFO("lose disk ", lose_disk, " ", report(o));
      REQUIRE(o.ok());
      // The others wait for c's lease to lapse, and a round; then go on without it.
      CHECK(longest_gap(o, kAt, kAt + kDown) <= kLeaseTtl + 2 * kRound);
      CHECK(std::count_if(o.history.begin(), o.history.end(), [](const SimCommit& c) {
              return c.at > kAt + kLeaseTtl + kRound && c.at < kAt + kDown;
            }) >= 2);
      // Back from its checkpoint (or from nothing), c catches up and its rounds are merged again.
      CHECK(std::any_of(o.history.begin(), o.history.end(), [](const SimCommit& c) { return c.at > kAt + kDown && merges(c, "c"); }));
      if (lose_disk > 0) CHECK(traced(o, "c: adopted a peer's state"));
    }
}

TEST_CASE("scenario: a partitioned site is in no commit while cut off, and re-syncs when the cut heals") {
  constexpr double kAt = 5, kCut = 7;
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    const auto o = simulate(seed, scenario(fault(Fault::Kind::Partition, 2, kAt, kCut)));
    INFO(report(o));
    REQUIRE(o.ok());
    int without_c = 0;
    for (const auto& c : o.history)
      // A round of c's that reached the others before the cut may still go into the next version.
      if (c.at > kAt + kLeaseTtl + kRound && c.at < kAt + kCut) {
        CHECK(c.record.proposer != "c");
        CHECK(!merges(c, "c"));
        ++without_c;
      }
    CHECK(without_c >= 3);  // the majority went on committing through the cut
    CHECK(traced(o, "c: event control_unreachable"));
    CHECK(std::any_of(o.history.begin(), o.history.end(), [](const SimCommit& c) { return c.at > kAt + kCut && merges(c, "c"); }));
  }
}

TEST_CASE("scenario: a straggler holds the others back no longer than the commit deadline, and stays a member") {
  // As a real job's lease would be against its rounds: long enough that c stays a member while
  // stopped, so only the deadline lets the others go on.
  constexpr double kAt = 8, kStopped = 3, kTtl = 5;
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    auto options = scenario(fault(Fault::Kind::Stop, 2, kAt, kStopped));
    options.lease_ttl_s = kTtl;
    // DiLoCo's rounds: with fragments, each version waits for its fragment's turn at every live site.
    options.fragments = 1;
    const auto o = simulate(seed, options);
    INFO(report(o));
    REQUIRE(o.ok());
    CHECK(std::count_if(o.history.begin(), o.history.end(),
                        [](const SimCommit& c) { return c.at > kAt && c.at < kAt + kStopped && !merges(c, "c"); }) >= 2);
    CHECK(longest_gap(o, kAt, kAt + kStopped) <= 2 * kRound);
    // Those commits count c's round as zero, not as absent: each moves the weights by two sites'
    // tokens of three (1,000 a round each in the simulator), and the checker's replay holds them to it.
    for (const auto& c : o.history)
      if (c.at > kAt && c.at < kAt + kStopped && !merges(c, "c")) CHECK(c.record.round_tokens == 3000);
    CHECK(!traced(o, "event member_key_restored"));
    CHECK(std::any_of(o.history.begin(), o.history.end(), [](const SimCommit& c) { return c.at > kAt + kStopped && merges(c, "c"); }));
  }
}

TEST_CASE(
    "scenario: a bit flipped in a site's outer weights is found before it spreads, and the site rebuilds its copy from "
    "its disk") {
  constexpr double kAt = 6;
  int proposals_refused = 0, versions_refused = 0, rebuilt = 0;
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    const auto o = simulate(seed, scenario(fault(Fault::Kind::OuterFlip, 2, kAt, 0, 0.5)));
    INFO(report(o));
    // The checker replays the log from the deltas: no version carries the flipped bit.
    REQUIRE(o.ok());
    CHECK(traced(o, "c: bit 3 of outer weight 16 flipped"));
    CHECK(o.diverged >= 1);
    // Its checkpoint and journal give the version back (no peer serves it a whole state), unless
    // a peer's newer state came first.
    CHECK((traced(o, "c: took its copy rebuilt from its disk") || traced(o, "c: adopted a peer's state")));
    rebuilt += static_cast<int>(o.rebuilt);
    // Found either at c's next proposal or at the next version it applies, whichever comes first.
    for (const auto& line : o.trace)
      if (line.find("c: event version_diverged") != std::string::npos) {
        proposals_refused += line.find("its copy of version") != std::string::npos;
        versions_refused += line.find("computed here hashes to") != std::string::npos;
      }
    CHECK(std::any_of(o.history.begin(), o.history.end(),
                      [](const SimCommit& c) { return c.at > kAt && merges(c, "c"); }));
  }
  MESSAGE("found at a proposal ", proposals_refused, " times, at a version applied ", versions_refused,
          " times; rebuilt from the disk ", rebuilt, " times");
  CHECK(proposals_refused + versions_refused >= 8);
  CHECK(rebuilt >= 6);
}

TEST_CASE("scenario: a site that sends one peer other bytes than it announced is caught, and no version merges its rounds after") {
  // No fault but the lie: a sends c a forged copy of every delta (whole through the link).
  int merged_before = 0;
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    SimOptions options;
    options.trace = true;
    options.plan = std::vector<Fault>{};
    options.mutations.equivocation = {"a", "c"};
    const auto o = simulate(seed, options);
    INFO(report(o));
    REQUIRE(o.ok());
    std::optional<double> caught;
    for (const auto& line : o.trace)
      if (!caught && line.find(" c: event delta_equivocation a ") != std::string::npos) caught = std::stod(line);
    REQUIRE(caught.has_value());
    CHECK(traced(o, " a: event delta_disputed a "));
    CHECK(traced(o, " b: event delta_disputed a "));
    // Within a round of being caught every site has read the dispute: no later version merges a's
    // rounds, and the versions go on without waiting for a.
    int after = 0;
    for (const auto& c : o.history) {
      if (c.at <= *caught + kRound) {
        merged_before += merges(c, "a");
        continue;
      }
      ++after;
      CHECK_FALSE(merges(c, "a"));
    }
    CHECK(after >= 5);
  }
  MESSAGE("versions merging a's rounds before its lie was caught, over 8 seeds: ", merged_before);
}

// a and c are down from the start (back from their disks at version 0); b commits alone, its
// newest version's record is written over, and b restarts from its disk. b's journal kept the
// record it applied: it puts that back. A journal without records (an older one) leaves b its own
// earlier vouch: the record it names stands at b, and b's next proposal chains onto it. Either
// way a and c, back, read the log afresh and apply the record b applied, or refuse the rewrite.
TEST_CASE(
    "scenario: a site back from its disk after its version's record was written over puts it back from its journal, or "
    "chains onto it") {
  for (const bool recordless : {false, true}) {
    int refused = 0;
    for (std::uint64_t seed = 0; seed < 8; ++seed) {
      SimOptions options;
      options.trace = true;
      options.fragments = 4;
      options.mutations.recordless_journal = recordless;
      options.plan =
          std::vector<Fault>{fault(Fault::Kind::Crash, 0, 0.2, 7.5), fault(Fault::Kind::Crash, 2, 0.2, 7.6),
                             fault(Fault::Kind::RewriteCommit, 1, 3.3, 0), fault(Fault::Kind::Crash, 1, 3.4, 0.5),
                             fault(Fault::Kind::PauseOuter, 1, 6.0, 4)};
      const auto o = simulate(seed, options);
      INFO("journal without records: ", recordless, "; ", report(o));
      REQUIRE(o.ok());
      CHECK(traced(o, " b: event commit_restored ") != recordless);
      CHECK(traced(o, " b: event commit_contradicted b ") == recordless);
      // Each by the chain of the newest record it read (b's proposals, on the record b applied), or by b's vouch.
      refused += traced(o, " a: event commit_contradicted ") + traced(o, " c: event commit_contradicted ");
    }
    MESSAGE("journal without records: ", recordless, "; a and c refused the rewrite in ", refused, " runs of 16");
    CHECK((recordless ? refused >= 8 : refused == 0));
  }
}

TEST_CASE(
    "scenario: the control plane away as the job ends: sites wait for it, or end on the version they hold past "
    "[control] end_unreachable_s") {
  // Away from a little before the last rounds (24 of 1 s) to long after them.
  constexpr double kAt = 21, kOut = 60, kBound = 5;
  for (const double bound : {0.0, kBound})
    for (std::uint64_t seed = 0; seed < 6; ++seed) {
      auto options = scenario(fault(Fault::Kind::Outage, 0, kAt, kOut));
      options.end_unreachable_s = bound;
      const auto o = simulate(seed, options);
      INFO("bound ", bound, "; ", report(o));
      // The checker holds every site to a version of the log, weights and all; one that did not end
      // cut off, to the log's last.
      REQUIRE(o.ok());
      for (const std::string site : {"a", "b", "c"}) {
        const double at = finished_at(o, site);
        CHECK(at > 0);
        if (bound == 0) {
          // Nobody ends without the control plane: they end together on the last version once it is back.
          CHECK(at >= kAt + kOut);
          CHECK_FALSE(traced(o, site + ": event ended_cut_off"));
        } else {
          CHECK(at >= kAt + kBound);
          CHECK(at < kAt + kOut);
          CHECK(traced(o, site + ": event ended_cut_off"));
        }
      }
    }
}

TEST_CASE(
    "scenario: a site cut off as the job ends gives up past [control] end_unreachable_s, the others end on the last "
    "version") {
  constexpr double kAt = 21, kCut = 60, kBound = 5;
  int behind = 0;
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    auto options = scenario(fault(Fault::Kind::Partition, 2, kAt, kCut));
    options.end_unreachable_s = kBound;
    const auto o = simulate(seed, options);
    INFO(report(o));
    REQUIRE(o.ok());  // c holds a version of the log exactly; a and b its last
    CHECK(traced(o, "c: event ended_cut_off"));
    CHECK(finished_at(o, "c") >= kAt + kBound);
    CHECK(finished_at(o, "c") < kAt + kCut);
    for (const std::string site : {"a", "b"}) {
      CHECK(finished_at(o, site) > 0);
      CHECK_FALSE(traced(o, site + ": event ended_cut_off"));
    }
    // The others committed on without c after its lease lapsed: c ends on an older version.
    behind += traced(o, "c: finished at version " + std::to_string(o.history.size())) ? 0 : 1;
  }
  CHECK(behind == 6);
}

}  // namespace meridian
