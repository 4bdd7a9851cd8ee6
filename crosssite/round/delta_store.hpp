#pragma once
// The deltas' bytes one site holds: as they arrived (from the link, its own, or its journal),
// which of them matched their announced digest, their norms once screened, and when each
// missing one was last asked for. A copy that does not match its digest is dropped, never used.
// A delta its replicas hold in parts (held_parts.hpp) is judged by their reports alike, and a
// commit hands its replicas only its name for it.
// Also the norm screens (one per fragment), the journal of the deltas of versions proposed or
// applied here, and the weighted mean a commit applies.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "crosssite/outer/merged_deltas.hpp"
#include "crosssite/outer/outer_state.hpp"
#include "crosssite/round/commit_rule.hpp"
#include "crosssite/round/cross_site_types.hpp"
#include "crosssite/round/delta_journal.hpp"
#include "crosssite/round/delta_screen.hpp"
#include "crosssite/round/held_parts.hpp"
#include "crosssite/round/records.hpp"
#include "transport/link/link.hpp"

namespace meridian {

struct DeltaStoreOptions {
  int fragments = 1;
  DeltaScreenOptions screen;
  std::shared_ptr<DeltaJournal> journal;
  std::size_t keep_rounds = 8;  // per site, in the journal
};

class DeltaStore {
 public:
  // `link`: where bytes no longer needed go back for reuse.
  DeltaStore(DeltaStoreOptions options, Link& link);

  // A fresh copy of a delta (not verified, not screened yet). `journaled`: read from the journal.
  void put(const DeltaKey& key, std::vector<std::byte> bytes, bool journaled = false);
  // This site's own delta, with the digest taken where it was made: not hashed a second time.
  void put_own(const DeltaKey& key, std::vector<std::byte> bytes, const Digest& digest);
  // A copy from the link: kept unless a copy that matched its digest is here already (a late
  // duplicate, maybe damaged, must not replace the good one: its owner may be gone by now).
  void arrive(const DeltaKey& key, std::vector<std::byte> bytes);
  // A delta this site's replicas hold in parts, none whole: judged by the reports put together.
  void arrive_in_parts(const DeltaKey& key, HeldInParts held);
  // The group re-formed: its replicas' parts are gone (each such delta is asked for again, whole).
  void drop_in_parts();
  bool has(const DeltaKey& key) const { return arrived_.contains(key) || in_parts_.contains(key); }
  std::size_t held_from(const std::string& site) const;
  // The bytes of `key` if they match `digest` (hashed once); a copy that does not is dropped
  // and said (`delta_damaged`). Null when absent or dropped: the caller asks for it again.
  const std::vector<std::byte>* verified(const DeltaKey& key, const Digest& digest, CrossSiteEvents& events,
                                         CrossSiteTraffic& traffic);
  // The same for a delta whole or in parts: whether it is here and matches `digest` (parts whose
  // units do not are dropped and said, as a copy that does not).
  bool held(const DeltaKey& key, const Digest& digest, CrossSiteEvents& events, CrossSiteTraffic& traffic);
  // The copies of `key` that came whole through the link and did not match their digest, and the
  // digest of the last: its sender sent bytes other than it announced (journal copies do not count).
  struct WrongCopies {
    int count = 0;
    Digest seen{};
  };
  const WrongCopies* wrong_copies(const DeltaKey& key) const;
  // Screens verified bytes once; the verdict (a delta that passed has a norm from then on).
  // The delta must be held() first.
  DeltaScreen::Verdict screen(const DeltaAnnouncement& a, std::size_t n);
  bool screened(const DeltaKey& key) const { return norms_.contains(key); }
  // Whether asking `key`'s owner again is due: not at once (it is usually on its way) unless it is
  // `overdue` (nobody sends it unasked), then once every `rerequest_s`.
  bool ask_due(const DeltaKey& key, double now, double rerequest_s, bool overdue = false);

  // The version this site holds now: the screens take the history its record carries (older
  // records: they learn the norms of its deltas decoded here).
  void follow_screens(const CommitRecord& record);
  // Forgets `site`'s rounds up to `round` (merged), handing their bytes back to the link.
  void forget_through(const std::string& site, std::int64_t round);
  // Puts the deltas of a version about to be proposed or applied in the journal.
  void journal(const std::vector<CommitEntry>& entries);

  // What a commit applies: per fragment its entries cover, the weighted mean of those entries,
  // scaled by commit_share (staleness, missing sites). Every entry must be verified here.
  // A sharded state (OuterState::sharded) gets the deltas still encoded instead of `mean`: its
  // replicas each take the mean of their parts (MergedDeltas), and no whole one is decoded here.
  struct Means {
    std::vector<int> fragments;
    std::vector<float> mean;
    std::optional<MergedDeltas> merged;
    std::vector<std::vector<double>> screens;  // every fragment's screen once the commit is made
  };
  Means mean_of(const CommitRecord& record, const OuterState& state, const CommitRuleOptions& rule);

 private:
  // A delta's verdict from its bytes, decoded a piece at a time (never whole). Error(Peer) when
  // they do not decode.
  static DeltaScreen::Verdict screened(const DeltaScreen& screen, const std::vector<std::byte>& bytes, std::size_t n,
                                       int rounds);

  DeltaStoreOptions options_;
  Link& link_;
  // The verdict of a delta held (whole or in parts), from its bytes or its tally.
  DeltaScreen::Verdict screened(const DeltaKey& key, const DeltaScreen& screen, std::size_t n, int rounds) const;

  std::map<DeltaKey, std::vector<std::byte>> arrived_;
  std::map<DeltaKey, HeldInParts> in_parts_;
  std::map<DeltaKey, Digest> parts_verified_;  // in_parts_ entries whose units matched this digest
  std::map<DeltaKey, Digest> verified_;  // arrived_ entries whose bytes matched this digest
  std::map<DeltaKey, double> norms_;            // screened fine, with their norm
  std::map<DeltaKey, double> asked_at_;
  std::set<DeltaKey> journaled_;
  std::set<DeltaKey> journal_copies_;  // arrived_ entries read from the journal, not from the link
  std::map<DeltaKey, WrongCopies> wrong_;
  std::vector<DeltaScreen> screens_;  // by fragment: each fragment's deltas have norms of their own
};

}  // namespace meridian
