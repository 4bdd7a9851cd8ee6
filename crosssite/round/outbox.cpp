#include "crosssite/round/outbox.hpp"

#include <algorithm>

#include "core/util/error.hpp"

namespace meridian {

Outbox::Outbox(std::string site, std::shared_ptr<DeltaJournal> journal, std::size_t keep_rounds, bool checkpoints)
    : site_(std::move(site)),
      journal_(journal ? std::make_shared<DurableJournal>(std::move(journal), checkpoints) : nullptr),
      keep_rounds_(keep_rounds) {}

std::map<DeltaKey, std::vector<std::byte>> Outbox::load(std::size_t chunk_bytes) {
  chunk_bytes_ = chunk_bytes;
  if (!journal_) return {};
  auto all = journal_->load();
  for (const auto& [key, bytes] : all) {
    if (key.first != site_) continue;
    kept_[key.second] = Delta{std::make_shared<const std::vector<std::byte>>(bytes), chunk_hashes(bytes, chunk_bytes)};
  }
  return all;
}

void Outbox::scan(ControlPlane& control, const RoundKeys& keys, CrossSiteEvents& events) {
  for (const auto& [key, value] : control.get_prefix(keys.deltas() + site_ + "/")) {
    DeltaAnnouncement a;
    try {
      a = decode_announcement(value);
    } catch (const Error&) {
      continue;  // not ours to read: a record we cannot decode names no round
    }
    if (a.site != site_ || key != keys.delta(a.site, a.round)) continue;
    next_round_ = std::max(next_round_, a.round + 1);
    announced_.insert(a.round);
    if (a.withdrawn || kept_.contains(a.round)) continue;
    a.withdrawn = true;
    control.put(key, encode(a));
    events.push_back({"delta_withdrawn", site_, a.round, "announced by an earlier incarnation, its bytes lost"});
  }
  // Journaled but not announced (yet: an announcement can be applied late, after its site died)
  // is kept, and numbering goes on after it: a round number is never used for other bytes.
  if (!kept_.empty()) next_round_ = std::max(next_round_, kept_.rbegin()->first + 1);
  scanned_ = true;
}

const Outbox::Delta& Outbox::keep(const DeltaAnnouncement& a, std::vector<std::byte> encoded, ChunkHashes hashes) {
  // On disk before any peer can see it: a commit that lists it must find it after a restart.
  if (journal_) journal_->write({site_, a.round}, encoded);
  auto& kept = kept_[a.round] = Delta{std::make_shared<const std::vector<std::byte>>(std::move(encoded)), std::move(hashes)};
  const Delta* mine = &kept;
  const auto round = a.round;
  while (kept_.size() > keep_rounds_ && kept_.begin()->first != round) kept_.erase(kept_.begin());
  // Kept as long as in memory, merged or not (a peer whose disk holds an older version than this
  // site's may need them), and until this site's own checkpoint holds a version that merged them.
  if (journal_) journal_->erase_through(site_, kept_.begin()->first - 1);
  // A round dropped here is one no commit took (too stale, or refused): no longer in flight.
  std::erase_if(in_flight_, [&](const auto& kv) { return !kept_.contains(kv.first); });
  std::erase_if(announced_, [&](std::int64_t r) { return !kept_.contains(r); });
  return *mine;
}

void Outbox::merged_through(std::int64_t round) {
  std::erase_if(in_flight_, [&](const auto& kv) { return kv.first <= round; });
}

std::uint64_t Outbox::in_flight_bytes() const {
  std::uint64_t total = 0;
  for (const auto& [round, bytes] : in_flight_) total += bytes;
  return total;
}

std::vector<std::pair<std::int64_t, const Outbox::Delta*>> Outbox::announced_after(std::int64_t merged) const {
  std::vector<std::pair<std::int64_t, const Delta*>> out;
  for (const auto& [round, delta] : kept_)
    if (round > merged && announced_.contains(round)) out.emplace_back(round, &delta);
  return out;
}

const Outbox::Delta* Outbox::find(std::int64_t round) {
  if (const auto it = kept_.find(round); it != kept_.end()) return &it->second;
  if (const auto it = recalled_.find(round); it != recalled_.end()) return &it->second;
  auto bytes = journal_ ? journal_->read({site_, round}) : std::nullopt;
  if (!bytes) return nullptr;
  if (recalled_.size() >= keep_rounds_) recalled_.erase(recalled_.begin());
  auto hashes = chunk_hashes(*bytes, chunk_bytes_);
  auto& recalled = recalled_[round] = Delta{std::make_shared<const std::vector<std::byte>>(std::move(*bytes)), std::move(hashes)};
  return &recalled;
}

void Outbox::announce(ControlPlane& control, const RoundKeys& keys) {
  while (!unannounced_.empty()) {
    const auto& a = unannounced_.front();
    control.put(keys.delta(a.site, a.round), encode(a));
    announced_.insert(a.round);
    unannounced_.erase(unannounced_.begin());
  }
}

}  // namespace meridian
