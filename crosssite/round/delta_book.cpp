#include "crosssite/round/delta_book.hpp"

#include <algorithm>

#include "core/util/error.hpp"

namespace meridian {

std::uint64_t DeltaBook::read(ControlPlane& control, const RoundKeys& keys) {
  const auto read = control.get_prefix_since(keys.deltas(), revision_ + 1);
  revision_ = read.revision;
  std::uint64_t unreadable = 0;
  for (const auto& [key, value] : read.kvs) {
    try {
      if (RoundKeys::is_dispute(key)) {
        read_dispute(key, value, keys);
        continue;
      }
      if (RoundKeys::is_vouch(key)) {
        auto v = decode_vouch(value);
        if (key != keys.vouch(v.site)) throw make_error(ErrorKind::Peer, "vouch ", key);  // not its own
        read_vouches_.push_back(std::move(v));
        continue;
      }
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

void DeltaBook::read_dispute(const std::string& key, const std::string& value, const RoundKeys& keys) {
  auto d = decode_dispute(value);
  // Filed under another name, or by the accused about itself: not trusted.
  if (key != keys.dispute(d.site, d.round, d.by) || d.by == d.site) throw make_error(ErrorKind::Peer, "dispute ", key);
  if (banned_.contains(d.site)) return;
  banned_.emplace(d.site, d);
  read_disputes_.push_back(std::move(d));
}

std::optional<std::int64_t> DeltaBook::newest_refused(const std::string& site) const {
  const std::int64_t merged = merged_round(site);
  std::optional<std::int64_t> newest;
  for (const auto& [s, round] : refused_)
    if (s == site && round > merged) newest = std::max(newest.value_or(round), round);
  return newest;
}

std::set<DeltaKey> DeltaBook::refusals() const {
  std::set<DeltaKey> out = refused_;
  for (const auto& [key, a] : announced_)
    if (banned(key.first)) out.insert(key);
  return out;
}

void DeltaBook::dispute(const DeltaDispute& d) {
  if (!banned_.emplace(d.site, d).second) return;
  unfiled_.push_back(d);
}

void DeltaBook::file_disputes(ControlPlane& control, const RoundKeys& keys) {
  while (!unfiled_.empty()) {
    const DeltaDispute& d = unfiled_.front();
    control.put(keys.dispute(d.site, d.round, d.by), encode(d));
    unfiled_.erase(unfiled_.begin());
  }
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

std::int64_t DeltaBook::merged_round(const std::string& site) const {
  const auto it = merged_.find(site);
  return it == merged_.end() ? -1 : it->second;
}

void DeltaBook::fill(CommitView& view) const {
  for (const auto& [site, round] : final_round_) view.finished.insert(site);
  view.applied = merged_;
  for (const auto& [key, a] : announced_) view.announced.push_back(a);
  view.refused = refusals();
  // No commit waits for a site caught equivocating, nor counts its rounds in a full one: like a
  // paused site's, every round it offers is refused.
  for (const auto& [site, d] : banned_) view.paused.insert(site);
  for (const auto& [site, newest] : round_tokens_) view.round_tokens[site] = newest.second;
}

}  // namespace meridian
