#include "sync/round/commit_rule.hpp"

#include <algorithm>

#include "sync/round/fragments.hpp"

namespace meridian {

std::map<std::string, DeltaAnnouncement> open_offers(const CommitView& view, const CommitRuleOptions& options) {
  std::map<std::string, DeltaAnnouncement> offer;
  for (const auto& a : view.announced) {
    if (std::find(view.live_sites.begin(), view.live_sites.end(), a.site) == view.live_sites.end()) continue;
    const auto applied = view.applied.find(a.site);
    if (applied != view.applied.end() && a.round <= applied->second) continue;
    if (view.refused.contains({a.site, a.round})) continue;
    if (a.fragment < 0 || a.fragment >= options.fragments) continue;  // no fragment of this job
    // A base newer than the newest version cannot be honest; a base too old would weigh nothing.
    const std::int64_t staleness = staleness_of(view.version, a.base_version, options);
    if (staleness < 0 || staleness > options.staleness.max_staleness || a.tokens < 0) continue;
    const auto [it, fresh] = offer.try_emplace(a.site, a);
    if (!fresh && a.round < it->second.round) it->second = a;
  }
  return offer;
}

std::int64_t staleness_of(std::int64_t version, std::int64_t base_version, const CommitRuleOptions& options) {
  return fragment_staleness(version, base_version, options.fragments);
}

int commit_fragment(const CommitView& view, const std::map<std::string, DeltaAnnouncement>& offers) {
  // A live site with nothing open may be about to announce the expected fragment: wait for it.
  const bool expected =
      view.next_fragment >= 0 &&
      (offers.size() < view.live_sites.size() ||
       std::any_of(offers.begin(), offers.end(), [&](const auto& o) { return o.second.fragment == view.next_fragment; }));
  if (expected || offers.empty()) return std::max(view.next_fragment, 0);
  const auto oldest = std::min_element(offers.begin(), offers.end(), [](const auto& x, const auto& y) {
    return std::pair(x.second.base_version, x.second.fragment) < std::pair(y.second.base_version, y.second.fragment);
  });
  return oldest->second.fragment;
}

std::optional<std::vector<CommitEntry>> decide_commit(const CommitView& view, const CommitRuleOptions& options) {
  const auto offer = open_offers(view, options);
  const int fragment = commit_fragment(view, offer);
  std::vector<CommitEntry> entries;
  int other = 0;  // live sites whose open offer is another fragment's
  for (const auto& [site, a] : offer) {  // std::map: sorted by site
    other += a.fragment != fragment;
    if (a.fragment != fragment || !view.held.contains({site, a.round})) continue;
    const double weight = staleness_weight(a.tokens, staleness_of(view.version, a.base_version, options), options.staleness);
    if (weight > 0) entries.push_back({site, a.round, a.base_version, weight, a.checksum});
  }
  if (entries.empty()) return std::nullopt;  // nothing that would move the weights
  const auto ready = static_cast<int>(entries.size());
  const int live = static_cast<int>(view.live_sites.size()) - other;
  const bool quorum = options.quorum > 0 ? ready >= options.quorum : ready >= live;
  const bool late = view.first_held_at && view.deadline_s && view.now >= *view.first_held_at + *view.deadline_s;
  if (!quorum && !late) return std::nullopt;
  return entries;
}

}  // namespace meridian
