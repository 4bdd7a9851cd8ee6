#include "sync/round/commit_rule.hpp"

#include <algorithm>

namespace meridian {

std::optional<std::vector<CommitEntry>> decide_commit(const CommitView& view, const CommitRuleOptions& options) {
  std::map<std::string, const DeltaAnnouncement*> candidate;  // by site: its oldest usable round
  for (const auto& a : view.announced) {
    const auto applied = view.applied.find(a.site);
    if (applied != view.applied.end() && a.round <= applied->second) continue;
    // A base newer than the newest version cannot be honest; a base too old would weigh nothing.
    const std::int64_t staleness = view.version - a.base_version;
    if (staleness < 0 || staleness > options.staleness.max_staleness || a.tokens < 0) continue;
    auto& best = candidate[a.site];
    if (best == nullptr || a.round < best->round) best = &a;
  }
  const bool due = options.quorum > 0
                       ? static_cast<int>(candidate.size()) >= options.quorum
                       : !view.live_sites.empty() &&
                             std::all_of(view.live_sites.begin(), view.live_sites.end(),
                                         [&](const std::string& s) { return candidate.contains(s); });
  if (!due) return std::nullopt;
  std::vector<CommitEntry> entries;
  for (const auto& [site, a] : candidate)  // std::map: sorted by site
    entries.push_back({site, a->round, a->base_version,
                       staleness_weight(a->tokens, view.version - a->base_version, options.staleness), a->checksum});
  if (std::all_of(entries.begin(), entries.end(), [](const CommitEntry& e) { return e.weight <= 0; }))
    return std::nullopt;  // nothing that would move the weights: wait for more
  return entries;
}

}  // namespace meridian
