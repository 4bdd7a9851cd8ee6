#pragma once
// This site's own deltas: the latest `keep_rounds` kept to send again (to a peer that asks, or
// that (re)joins), in the journal on disk before any peer can see them, counted in flight until
// a commit merges them, and their announcements queued until the control plane takes them.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "crosssite/control/control_plane.hpp"
#include "crosssite/round/cross_site_types.hpp"
#include "crosssite/round/durable_journal.hpp"
#include "crosssite/round/records.hpp"
#include "transport/chunking/chunker.hpp"

namespace meridian {

class Outbox {
 public:
  struct Delta {
    std::shared_ptr<const std::vector<std::byte>> bytes;
    ChunkHashes hashes;  // for the link, taken where the bytes were made
  };
  // `journal`: null for none (a restart then loses every delta). It is kept as a DurableJournal
  // (`checkpoints`: the site writes checkpoints and reports each through durable()), which the
  // site's DeltaStore writes too.
  Outbox(std::string site, std::shared_ptr<DeltaJournal> journal, std::size_t keep_rounds, bool checkpoints);
  std::shared_ptr<DeltaJournal> journal() const { return journal_; }
  // A version applied or adopted, and what it merged; a version in the site's checkpoint.
  void merged_in(std::int64_t version, const std::map<std::string, std::int64_t>& merged) {
    if (journal_) journal_->merged(version, merged);
  }
  void durable(std::int64_t version) {
    if (journal_) journal_->durable(version);
  }

  // What the journal holds, read back at start: this site's rounds are kept again (their hashes
  // for `chunk_bytes`-byte chunks); every entry, a peer's included, is returned.
  std::map<DeltaKey, std::vector<std::byte>> load(std::size_t chunk_bytes);
  // At the first join: the rounds this site announced (or journaled) before. Numbering goes on
  // after them; the announced ones whose bytes are gone are withdrawn, so that no commit waits
  // for them.
  void scan(ControlPlane& control, const RoundKeys& keys, CrossSiteEvents& events);
  bool scanned() const { return scanned_; }
  std::int64_t next_round() const { return next_round_; }

  const Delta& keep(const DeltaAnnouncement& a, std::vector<std::byte> encoded, ChunkHashes hashes);
  void sent(std::int64_t round, std::size_t bytes) { in_flight_[round] += bytes; }
  void merged_through(std::int64_t round);
  std::uint64_t in_flight_bytes() const;
  // Any kept round (a peer that asks saw it announced), or one that has left the window but not
  // the journal: a site far behind keeps sending rounds while a version that merged an older one
  // waits for its bytes, and nobody else has them (docs/simulator.md, "Bugs it found").
  const Delta* find(std::int64_t round);
  // The kept rounds after `merged` that the control plane has announced: what a site that
  // (re)joins is sent. A journaled round never announced (an earlier job's, or one whose
  // announcement never went out) is not pushed to anyone.
  std::vector<std::pair<std::int64_t, const Delta*>> announced_after(std::int64_t merged) const;

  // Announcements the control plane has not taken yet, oldest first.
  void queue(const DeltaAnnouncement& a) { unannounced_.push_back(a); }
  bool pending() const { return !unannounced_.empty(); }
  // Puts them, oldest first; one that fails throws (run it through the gate) and stays queued.
  void announce(ControlPlane& control, const RoundKeys& keys);

 private:
  std::string site_;
  std::shared_ptr<DurableJournal> journal_;
  std::size_t keep_rounds_;
  std::map<std::int64_t, Delta> kept_;               // by round
  std::map<std::int64_t, Delta> recalled_;           // read back from the journal for a peer, at most keep_rounds_
  std::size_t chunk_bytes_ = kDefaultChunkBytes;     // the link's, for the hashes of recalled rounds
  std::map<std::int64_t, std::uint64_t> in_flight_;  // rounds not merged yet: bytes sent to peers
  std::vector<DeltaAnnouncement> unannounced_;
  std::set<std::int64_t> announced_;  // kept rounds the control plane holds an announcement of
  std::int64_t next_round_ = 0;
  bool scanned_ = false;
};

}  // namespace meridian
