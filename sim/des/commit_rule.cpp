#include "sim/des/commit_rule.hpp"

#include <algorithm>

namespace meridian::sim {

CommitPlan plan_commit(std::span<const PendingDelta> pending, const std::vector<char>& needed,
                       const std::vector<char>& can_propose, const CommitRule& rule) {
  CommitPlan best;
  if (pending.empty()) return best;
  const int n = static_cast<int>(needed.size());
  const int need_count = static_cast<int>(std::count(needed.begin(), needed.end(), 1));
  std::vector<double> held(n);
  for (int p = 0; p < n; ++p) {
    if (!can_propose[p]) continue;
    std::fill(held.begin(), held.end(), kNever);
    double first = kNever;
    for (const auto& d : pending) {
      held[d.site] = std::min(held[d.site], d.arrive[p]);
      first = std::min(first, d.arrive[p]);
    }
    std::vector<double> gates;  // the earliest delta of each needed site, as p holds them
    for (int s = 0; s < n; ++s)
      if (needed[s]) gates.push_back(held[s]);
    std::sort(gates.begin(), gates.end());
    double t = first + rule.deadline_s;
    if (rule.all) t = std::min(t, need_count > 0 ? gates.back() : kNever);
    if (rule.quorum > 0 && need_count > 0) t = std::min(t, gates[std::min(rule.quorum, need_count) - 1]);
    if (t < best.t) best = {t, p};
  }
  return best;
}

}  // namespace meridian::sim
