#include "crosssite/round/commit_rule.hpp"

#include <algorithm>

#include "crosssite/outer/fragments.hpp"

namespace meridian {

bool mergeable(const DeltaAnnouncement& a, const CommitView& view, const CommitRuleOptions& options) {
  const auto applied = view.applied.find(a.site);
  if (applied != view.applied.end() && a.round <= applied->second) return false;
  if (a.withdrawn || view.refused.contains({a.site, a.round})) return false;
  if (a.fragment < 0 || a.fragment >= options.fragments) return false;
  const std::int64_t staleness = staleness_of(view.version, a.base_version, options);
  return staleness >= 0 && staleness <= options.staleness.max_staleness && a.tokens >= 0;
}

std::map<std::string, std::vector<DeltaAnnouncement>> open_rounds(const CommitView& view, const CommitRuleOptions& options) {
  std::map<std::string, std::vector<DeltaAnnouncement>> open;
  for (const auto& a : view.announced)
    if (std::find(view.live_sites.begin(), view.live_sites.end(), a.site) != view.live_sites.end() &&
        mergeable(a, view, options))
      open[a.site].push_back(a);
  for (auto& [site, rounds] : open)
    std::sort(rounds.begin(), rounds.end(), [](const auto& x, const auto& y) { return x.round < y.round; });
  return open;
}

std::map<std::string, DeltaAnnouncement> open_offers(const CommitView& view, const CommitRuleOptions& options) {
  std::map<std::string, DeltaAnnouncement> offer;
  for (const auto& [site, rounds] : open_rounds(view, options)) offer.emplace(site, rounds.front());
  return offer;
}

std::int64_t staleness_of(std::int64_t version, std::int64_t base_version, const CommitRuleOptions& options) {
  return fragment_staleness(version, base_version, options.fragments);
}

int commit_fragment(const CommitView& view, const std::map<std::string, std::vector<DeltaAnnouncement>>& rounds) {
  for (const auto& site : view.live_sites)
    if (!rounds.contains(site) && !view.finished.contains(site) && !view.paused.contains(site))
      return view.next_fragment;  // it may announce it
  for (const auto& [site, open] : rounds)
    for (const auto& a : open)
      if (a.fragment == view.next_fragment) return view.next_fragment;
  std::optional<std::pair<std::int64_t, int>> oldest;
  for (const auto& [site, open] : rounds)
    if (const auto key = std::pair(open.front().base_version, open.front().fragment); !oldest || key < *oldest)
      oldest = key;
  return oldest ? oldest->second : view.next_fragment;
}

int awaited_sites(const CommitView& view, const std::map<std::string, std::vector<DeltaAnnouncement>>& rounds,
                  int fragment) {
  int awaited = 0;
  for (const auto& site : view.live_sites) {
    const auto open = rounds.find(site);
    const bool offers = open != rounds.end() && std::any_of(open->second.begin(), open->second.end(),
                                                            [&](const auto& a) { return a.fragment == fragment; });
    // A paused site announces nothing new, and a finished one nothing more.
    awaited += (!view.paused.contains(site) && !view.finished.contains(site)) || offers;
  }
  return awaited;
}

bool every_offer_refused(const CommitView& view, const CommitRuleOptions& options) {
  if (!open_offers(view, options).empty()) return false;
  int announcing = 0;
  for (const auto& site : view.live_sites) {
    if (view.paused.contains(site) || view.finished.contains(site)) continue;
    ++announcing;
    const auto applied = view.applied.find(site);
    const bool refused = std::any_of(view.announced.begin(), view.announced.end(), [&](const DeltaAnnouncement& a) {
      return a.site == site && a.base_version == view.version &&
             (applied == view.applied.end() || a.round > applied->second) && view.refused.contains({a.site, a.round});
    });
    if (!refused) return false;  // it may still announce a round a version can take
  }
  return announcing > 0;
}

std::optional<std::vector<CommitEntry>> decide_commit(const CommitView& view, const CommitRuleOptions& options) {
  const auto rounds = open_rounds(view, options);
  const int fragment = commit_fragment(view, rounds);
  std::vector<CommitEntry> entries;
  int ready = 0;
  for (const auto& [site, open] : rounds) {  // std::map: sorted by site
    const auto last = std::find_if(open.begin(), open.end(), [&](const auto& a) { return a.fragment == fragment; });
    if (last == open.end()) continue;
    std::vector<CommitEntry> mine;
    for (auto a = open.begin(); a != last + 1; ++a) {
      if (!view.held.contains({site, a->round})) break;
      // A delta spanning k paused rounds is the sum of k rounds' progress: weighed as one round's
      // tokens it adds what k rounds sent one by one would have (each its share of a version),
      // rather than k times that, which would let one such delta make most of its version.
      const double weight = staleness_weight(a->tokens / std::max(1, a->rounds),
                                             staleness_of(view.version, a->base_version, options), options.staleness);
      if (weight > 0) mine.push_back({site, a->round, a->base_version, weight, a->digest, a->fragment});
      if (a == last) {
        entries.insert(entries.end(), mine.begin(), mine.end());
        ready += !mine.empty();
      }
    }
  }
  if (entries.empty()) return std::nullopt;  // nothing that would move the weights
  const bool quorum = ready >= (options.quorum > 0 ? options.quorum : awaited_sites(view, rounds, fragment));
  const bool late = view.first_held_at && view.deadline_s && view.now >= *view.first_held_at + *view.deadline_s;
  if (!quorum && !late) return std::nullopt;
  return entries;
}

double full_round_tokens(const CommitView& view, const std::vector<CommitEntry>& entries) {
  std::set<std::string> counted(view.finished.begin(), view.finished.end());
  counted.insert(view.live_sites.begin(), view.live_sites.end());
  // A paused site (or one caught equivocating) offers nothing: it counts only with a round it sent.
  std::erase_if(counted, [&](const std::string& site) { return view.paused.contains(site); });
  for (const auto& e : entries) counted.insert(e.site);
  double total = 0;
  for (const auto& site : counted)
    if (const auto it = view.round_tokens.find(site); it != view.round_tokens.end()) total += it->second;
  return total;
}

double commit_share(std::int64_t version, const std::vector<CommitEntry>& entries, double round_tokens,
                    const CommitRuleOptions& options) {
  double weight = 0, tokens = 0;
  for (const auto& e : entries) {
    weight += e.weight;
    // A peer's record may list a delta too stale to weigh anything: its weight is its tokens then.
    const double decay = staleness_weight(1, std::max<std::int64_t>(0, staleness_of(version - 1, e.base_version, options)),
                                          options.staleness);
    tokens += decay > 0 ? e.weight / decay : e.weight;
  }
  const double whole = std::max(tokens, round_tokens);
  return whole > 0 ? weight / whole : 1.0;  // no weight at all: weighted_mean refuses the commit
}

}  // namespace meridian
