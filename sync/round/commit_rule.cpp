#include "sync/round/commit_rule.hpp"

#include <algorithm>

namespace meridian {

std::map<std::string, DeltaAnnouncement> open_offers(const CommitView& view, const CommitRuleOptions& options) {
  std::map<std::string, DeltaAnnouncement> offer;
  for (const auto& a : view.announced) {
    if (std::find(view.live_sites.begin(), view.live_sites.end(), a.site) == view.live_sites.end()) continue;
    const auto applied = view.applied.find(a.site);
    if (applied != view.applied.end() && a.round <= applied->second) continue;
    if (view.refused.contains({a.site, a.round})) continue;
    // A base newer than the newest version cannot be honest; a base too old would weigh nothing.
    const std::int64_t staleness = view.version - a.base_version;
    if (staleness < 0 || staleness > options.staleness.max_staleness || a.tokens < 0) continue;
    const auto [it, fresh] = offer.try_emplace(a.site, a);
    if (!fresh && a.round < it->second.round) it->second = a;
  }
  return offer;
}

std::optional<std::vector<CommitEntry>> decide_commit(const CommitView& view, const CommitRuleOptions& options) {
  const auto offer = open_offers(view, options);
  std::vector<CommitEntry> entries;
  for (const auto& [site, a] : offer) {  // std::map: sorted by site
    if (!view.held.contains({site, a.round})) continue;
    const double weight = staleness_weight(a.tokens, view.version - a.base_version, options.staleness);
    if (weight > 0) entries.push_back({site, a.round, a.base_version, weight, a.checksum});
  }
  if (entries.empty()) return std::nullopt;  // nothing that would move the weights
  const auto ready = static_cast<int>(entries.size());
  const int live = static_cast<int>(view.live_sites.size());
  const bool quorum = options.quorum > 0 ? ready >= options.quorum : ready >= live;
  const bool late = view.first_held_at && view.deadline_s && view.now >= *view.first_held_at + *view.deadline_s;
  if (!quorum && !late) return std::nullopt;
  return entries;
}

}  // namespace meridian
