#include "sync/round/delta_book.hpp"

#include <algorithm>

#include "core/util/error.hpp"

namespace meridian {

std::uint64_t DeltaBook::read(ControlPlane& control, const RoundKeys& keys) {
  const auto read = control.get_prefix_since(keys.deltas(), revision_ + 1);
  revision_ = read.revision;
  std::uint64_t unreadable = 0;
  for (const auto& [key, value] : read.kvs) {
    try {
      auto a = decode_announcement(value);
      if (key != keys.delta(a.site, a.round)) continue;  // filed under another name: not trusted
      note(a);
      if (a.site != site_) peers_newest_round_ = std::max(peers_newest_round_, a.round);
      if (a.round <= merged_round(a.site)) continue;
      announced_[{a.site, a.round}] = std::move(a);
    } catch (const Error&) {
      ++unreadable;
    }
  }
  return unreadable;
}

void DeltaBook::add(const DeltaAnnouncement& a) {
  announced_[{a.site, a.round}] = a;
  note(a);
}

void DeltaBook::note(const DeltaAnnouncement& a) {
  if (a.final) final_round_[a.site] = a.round;
  auto& [round, tokens] = round_tokens_.try_emplace(a.site, -1, 0.0).first->second;
  if (a.round > round && a.tokens >= 0) {
    round = a.round;
    tokens = static_cast<double>(a.tokens) / std::max(1, a.rounds);
  }
}

void DeltaBook::merged(const std::string& site, std::int64_t round) {
  merged_[site] = std::max(merged_[site], round);
  std::erase_if(announced_, [&](const auto& kv) { return kv.first.first == site && kv.first.second <= round; });
}

void DeltaBook::restarted(const std::string& site, const std::function<bool(const DeltaKey&)>& arrived) {
  std::erase_if(announced_, [&](const auto& kv) { return kv.first.first == site && !arrived(kv.first); });
}

std::int64_t DeltaBook::merged_round(const std::string& site) const {
  const auto it = merged_.find(site);
  return it == merged_.end() ? -1 : it->second;
}

void DeltaBook::fill(CommitView& view) const {
  for (const auto& [site, round] : final_round_) view.finished.insert(site);
  view.applied = merged_;
  for (const auto& [key, a] : announced_) view.announced.push_back(a);
  view.refused = refused_;
  for (const auto& [site, newest] : round_tokens_) view.round_tokens[site] = newest.second;
}

std::int64_t DeltaBook::backlog(std::int64_t version, const CommitRuleOptions& rule) const {
  std::int64_t n = 0;
  for (const auto& [key, a] : announced_)
    n += key.first == site_ && !refused_.contains(key) && a.fragment >= 0 && a.fragment < rule.fragments &&
         staleness_of(version, a.base_version, rule) <= rule.staleness.max_staleness;
  return n;
}

}  // namespace meridian
