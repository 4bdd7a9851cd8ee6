#pragma once
// When the next version can be committed, and by whom, given where every pending delta is when:
// the rule of crosssite/round's decide_commit seen from outside. Every site that can propose looks at
// the deltas it holds; the version is committed by the first for which the rule is met.
#include <algorithm>
#include <limits>
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

// `pending`: a range of deltas, each with `site` and `arrive` as PendingDelta has them.
// needed[s]: site s must contribute (it is live and has rounds to send); can_propose[p]: site p is up.
template <class Pending>
CommitPlan plan_commit(const Pending& pending, const std::vector<char>& needed, const std::vector<char>& can_propose,
                       const CommitRule& rule) {
  CommitPlan best;
  if (pending.empty()) return best;
  const int n = static_cast<int>(needed.size());
  const int need_count = static_cast<int>(std::count(needed.begin(), needed.end(), 1));
  // Scratch kept across calls: the simulator asks this after every round of every site.
  thread_local std::vector<double> held, gates;
  held.resize(n);
  gates.resize(need_count);
  const bool count_all = rule.all && need_count > 0;
  const int q = std::min(rule.quorum, need_count);
  for (int p = 0; p < n; ++p) {
    if (!can_propose[p]) continue;
    std::fill(held.begin(), held.end(), kNever);
    double first = kNever;
    for (const auto& d : pending) {
      held[d.site] = std::min(held[d.site], d.arrive[p]);
      first = std::min(first, d.arrive[p]);
    }
    double t = first + rule.deadline_s;
    if (count_all || q > 0) {
      int g = 0;  // the earliest delta of each needed site, as p holds them
      for (int s = 0; s < n; ++s)
        if (needed[s]) gates[g++] = held[s];
      if (count_all) t = std::min(t, *std::max_element(gates.begin(), gates.end()));
      if (q > 0) {
        std::nth_element(gates.begin(), gates.begin() + (q - 1), gates.end());
        t = std::min(t, gates[q - 1]);
      }
    }
    if (t < best.t) best = {t, p};
  }
  return best;
}

}  // namespace meridian::sim
