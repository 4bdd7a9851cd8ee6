#include "crosssite/round/delta_store.hpp"

#include <algorithm>

#include "core/util/error.hpp"
#include "core/util/hash.hpp"
#include "crosssite/codec/codec.hpp"
#include "crosssite/codec/codec_parts.hpp"
#include "crosssite/codec/delta_digest.hpp"
#include "crosssite/round/mutant.hpp"

namespace meridian {

DeltaStore::DeltaStore(DeltaStoreOptions options, Link& link)
    : options_(std::move(options)),
      link_(link),
      screens_(static_cast<std::size_t>(std::max(options_.fragments, 1)), DeltaScreen(options_.screen)) {}

void DeltaStore::put(const DeltaKey& key, std::vector<std::byte> bytes, bool journaled) {
  arrived_[key] = std::move(bytes);
  verified_.erase(key);
  norms_.erase(key);
  if (journaled) {
    journaled_.insert(key);
    journal_copies_.insert(key);
  } else {
    journal_copies_.erase(key);
  }
}

void DeltaStore::put_own(const DeltaKey& key, std::vector<std::byte> bytes, const Digest& digest) {
  put(key, std::move(bytes));
  verified_[key] = digest;
}

void DeltaStore::arrive(const DeltaKey& key, std::vector<std::byte> bytes) {
  if (verified_.contains(key)) {
    link_.recycle(std::move(bytes));
    return;
  }
  put(key, std::move(bytes));
}

void DeltaStore::arrive_in_parts(const DeltaKey& key, HeldInParts held) {
  if (verified_.contains(key)) return;  // here whole already
  in_parts_[key] = std::move(held);
  parts_verified_.erase(key);
}

void DeltaStore::drop_in_parts() {
  in_parts_.clear();
  parts_verified_.clear();
}

std::size_t DeltaStore::held_from(const std::string& site) const {
  std::size_t n = 0;
  for (auto it = arrived_.lower_bound({site, INT64_MIN}); it != arrived_.end() && it->first.first == site; ++it) ++n;
  for (auto it = in_parts_.lower_bound({site, INT64_MIN}); it != in_parts_.end() && it->first.first == site; ++it)
    n += arrived_.contains(it->first) ? 0 : 1;
  return n;
}

bool DeltaStore::held(const DeltaKey& key, const Digest& digest, CrossSiteEvents& events, CrossSiteTraffic& traffic) {
  if (verified(key, digest, events, traffic) != nullptr) return true;
  const auto it = in_parts_.find(key);
  if (it == in_parts_.end()) return false;
  if (const auto v = parts_verified_.find(key); v != parts_verified_.end() && v->second == digest) return true;
  if (mutant(Mutant::UnverifiedDeltas) || delta_digest(std::span<const Digest>(it->second.units)) == digest) {
    parts_verified_[key] = digest;
    return true;
  }
  ++traffic.refused.deltas_damaged;  // a part damaged past the link's checks, or not the delta announced
  events.push_back({"delta_damaged", key.first, key.second,
                    "the units of the parts its replicas hold do not match the announced digest: asked again"});
  in_parts_.erase(it);
  norms_.erase(key);
  return false;
}

namespace {

// Bytes that are no encoded delta hash to no delta's digest: all zeros then.
Digest digest_of(std::span<const std::byte> bytes) {
  try {
    return delta_digest(bytes);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Peer) throw;
    return {};
  }
}

}  // namespace

const std::vector<std::byte>* DeltaStore::verified(const DeltaKey& key, const Digest& digest,
                                                   CrossSiteEvents& events, CrossSiteTraffic& traffic) {
  const auto it = arrived_.find(key);
  if (it == arrived_.end()) return nullptr;
  // Hashed once: a commit's deltas are looked at on every poll until all of them are here.
  if (const auto v = verified_.find(key); v != verified_.end() && v->second == digest) return &it->second;
  const Digest seen = mutant(Mutant::UnverifiedDeltas) ? digest : digest_of(it->second);
  if (seen == digest) {
    verified_[key] = digest;
    return &it->second;
  }
  ++traffic.refused.deltas_damaged;  // damaged past the link's checks, or not the delta that was announced
  if (!journal_copies_.erase(key)) {
    WrongCopies& wrong = wrong_[key];
    ++wrong.count;
    wrong.seen = seen;
  }
  events.push_back({"delta_damaged", key.first, key.second, "its bytes do not match the announced digest: asked again"});
  link_.recycle(std::move(it->second));
  arrived_.erase(it);
  verified_.erase(key);
  norms_.erase(key);
  return nullptr;
}

const DeltaStore::WrongCopies* DeltaStore::wrong_copies(const DeltaKey& key) const {
  const auto it = wrong_.find(key);
  return it == wrong_.end() ? nullptr : &it->second;
}

DeltaScreen::Verdict DeltaStore::screened(const DeltaScreen& screen, const std::vector<std::byte>& bytes, std::size_t n,
                                          int rounds) {
  constexpr std::size_t kPiece = std::size_t{1} << 16;
  const std::size_t count = encoded_count(bytes);
  std::vector<float> piece(std::min(count, kPiece));
  DeltaScreen::Tally tally;
  for (std::size_t at = 0; at < count; at += kPiece) {
    const std::span<float> values(piece.data(), std::min(kPiece, count - at));
    decode_range(bytes, at, values);
    tally.add(values);
  }
  return screen.judge(tally, n, rounds);
}

DeltaScreen::Verdict DeltaStore::screened(const DeltaKey& key, const DeltaScreen& screen, std::size_t n,
                                          int rounds) const {
  if (const auto whole = arrived_.find(key); whole != arrived_.end() && verified_.contains(key))
    return screened(screen, whole->second, n, rounds);
  return screen.judge(in_parts_.at(key).tally, n, rounds);
}

DeltaScreen::Verdict DeltaStore::screen(const DeltaAnnouncement& a, std::size_t n) {
  DeltaScreen::Verdict verdict;
  try {
    verdict = screened({a.site, a.round}, screens_[static_cast<std::size_t>(a.fragment)], n, a.rounds);
  } catch (const Error& e) {
    verdict = {false, std::string("does not decode as a delta of this model: ") + e.what(), 0};
  }
  if (verdict.ok) norms_[{a.site, a.round}] = verdict.norm;
  return verdict;
}

bool DeltaStore::ask_due(const DeltaKey& key, double now, double rerequest_s, bool overdue) {
  auto [it, fresh] = asked_at_.try_emplace(key, now);
  if (fresh ? !overdue : now - it->second < rerequest_s) return false;
  it->second = now;
  return true;
}

void DeltaStore::follow_screens(const CommitRecord& record) {
  if (record.screens.size() == screens_.size()) {
    for (std::size_t f = 0; f < screens_.size(); ++f) screens_[f].follow(record.screens[f]);
    return;
  }
  for (const auto& e : record.entries)
    if (const auto n = norms_.find({e.site, e.round}); n != norms_.end())
      screens_[static_cast<std::size_t>(e.fragment)].accept(n->second);
}

void DeltaStore::forget_through(const std::string& site, std::int64_t round) {
  const auto done = [&](const DeltaKey& k) { return k.first == site && k.second <= round; };
  for (auto it = arrived_.begin(); it != arrived_.end();) {
    if (!done(it->first)) {
      ++it;
      continue;
    }
    link_.recycle(std::move(it->second));
    it = arrived_.erase(it);
  }
  std::erase_if(verified_, [&](const auto& kv) { return done(kv.first); });
  std::erase_if(in_parts_, [&](const auto& kv) { return done(kv.first); });
  std::erase_if(parts_verified_, [&](const auto& kv) { return done(kv.first); });
  std::erase_if(norms_, [&](const auto& kv) { return done(kv.first); });
  std::erase_if(asked_at_, [&](const auto& kv) { return done(kv.first); });
  std::erase_if(journal_copies_, done);
  std::erase_if(wrong_, [&](const auto& kv) { return done(kv.first); });
}

void DeltaStore::journal(const std::vector<CommitEntry>& entries) {
  if (!options_.journal) return;
  for (const auto& e : entries) {
    const DeltaKey key{e.site, e.round};
    // A delta held in parts has no bytes here: each replica journals its own part as it fills
    // it in (GroupChannel), and the journal gives it back whole.
    const auto bytes = arrived_.find(key);
    if (bytes == arrived_.end() || !verified_.contains(key) || !journaled_.insert(key).second) continue;
    options_.journal->write(key, bytes->second);
    const auto keep = static_cast<std::int64_t>(options_.keep_rounds);
    options_.journal->erase_through(e.site, e.round - keep);
    std::erase_if(journaled_, [&](const DeltaKey& k) { return k.first == e.site && k.second <= e.round - keep; });
  }
}

DeltaStore::Means DeltaStore::mean_of(const CommitRecord& record, const OuterState& state, const CommitRuleOptions& rule) {
  Means out;
  for (const auto& e : record.entries) out.fragments.push_back(e.fragment);
  std::sort(out.fragments.begin(), out.fragments.end());
  out.fragments.erase(std::unique(out.fragments.begin(), out.fragments.end()), out.fragments.end());
  for (const int fragment : out.fragments) {
    const std::size_t n = state.fragment(fragment).size;
    const DeltaScreen& screen = screens_[static_cast<std::size_t>(fragment)];
    std::vector<std::span<const std::byte>> encoded;
    std::vector<std::string> refs;  // a delta held in parts: how its replicas name it
    std::vector<double> weights;
    std::vector<CommitEntry> entries;
    for (const auto& e : record.entries) {
      if (e.fragment != fragment) continue;
      const DeltaKey key{e.site, e.round};
      entries.push_back(e);
      // The norm of every delta a commit merges, screened here or not, goes into the screen the
      // commit record carries (Means::screens).
      if (!norms_.contains(key)) norms_[key] = screened(key, screen, n, 1).norm;
      const bool whole = arrived_.contains(key) && verified_.contains(key);
      encoded.push_back(whole ? std::span<const std::byte>(arrived_.at(key)) : std::span<const std::byte>());
      refs.push_back(whole ? std::string() : in_parts_.at(key).ref);
      weights.push_back(e.weight);
    }
    // A late delta, or a missing site, also counts in absolute terms: a version made of stale
    // deltas, or of one site's of three, moves the weights less than a full round's. Same inputs,
    // same bits on every site.
    const double share = commit_share(record.number, entries, record.round_tokens, rule);
    if (state.sharded()) {
      out.merged = MergedDeltas{{}, weights, share, n, {}};
      for (const auto bytes : encoded) out.merged->encoded.emplace_back(bytes.begin(), bytes.end());
      if (std::any_of(refs.begin(), refs.end(), [](const std::string& r) { return !r.empty(); })) {
        out.merged->refs = std::move(refs);
        for (const auto& e : entries) out.merged->sources.emplace_back(e.site, e.round);
      }
      continue;
    }
    for (const auto& ref : refs)
      MERIDIAN_CHECK(ref.empty(), "delta ", ref, " held in parts by a site whose outer state is whole");
    const std::size_t at = out.mean.size();
    out.mean.resize(at + n);
    // Error(Peer) if the bytes (matching their digest) are no delta of this model.
    merged_mean(encoded, weights, share, n, 0, std::span(out.mean).subspan(at));
  }
  for (std::size_t f = 0; f < screens_.size(); ++f) {
    DeltaScreen after = screens_[f];
    for (const auto& e : record.entries)
      if (static_cast<std::size_t>(e.fragment) == f) after.accept(norms_.at({e.site, e.round}));
    out.screens.push_back(after.history());
  }
  return out;
}

}  // namespace meridian
