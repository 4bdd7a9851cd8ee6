#pragma once
// When the next version can be committed, and by whom, given where every pending delta is when:
// the rule of sync/round's decide_commit seen from outside. Every site that can propose looks at
// the deltas it holds; the version is committed by the first for which the rule is met.
#include <limits>
#include <span>
#include <vector>

namespace meridian::sim {

constexpr double kNever = std::numeric_limits<double>::infinity();

struct PendingDelta {
  int site = 0;
  std::vector<double> arrive;  // arrive[p]: when its bytes are all at site p (its sender: when announced)
};

struct CommitRule {
  bool all = true;           // due once a delta of every needed site is held
  int quorum = 0;            // due once this many needed sites' deltas are held (0: off)
  double deadline_s = kNever;  // due this long after the first pending delta is held
};

struct CommitPlan {
  double t = kNever;  // kNever: not due with what is pending
  int proposer = -1;
};

// needed[s]: site s must contribute (it is live and has rounds to send); can_propose[p]: site p is up.
CommitPlan plan_commit(std::span<const PendingDelta> pending, const std::vector<char>& needed,
                       const std::vector<char>& can_propose, const CommitRule& rule);

}  // namespace meridian::sim
