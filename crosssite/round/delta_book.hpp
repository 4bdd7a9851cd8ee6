#pragma once
// What the control plane says about the job's deltas, as one site has read it: the rounds
// announced and not merged yet, the newest round merged per site, each site's final round, how far
// the others have got, the rounds this site refused for good (their values failed the screen), and
// the sites caught equivocating (a dispute: every round of theirs is refused from then on). The
// bytes themselves are the DeltaStore's.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "crosssite/control/control_plane.hpp"
#include "crosssite/round/commit_rule.hpp"
#include "crosssite/round/cross_site_types.hpp"
#include "crosssite/round/records.hpp"

namespace meridian {

class DeltaBook {
 public:
  explicit DeltaBook(std::string site) : site_(std::move(site)) {}

  // Reads the announcements written since the last read; returns how many could not be read.
  std::uint64_t read(ControlPlane& control, const RoundKeys& keys);
  void add(const DeltaAnnouncement& a);  // this site's own, as it submits it
  // A commit merged `site`'s rounds up to `round`: none of them is open any more.
  void merged(const std::string& site, std::int64_t round);
  void refuse(const DeltaKey& key) { refused_.insert(key); }
  // This site caught `d.site` equivocating: refused here at once, filed for the others by file_disputes.
  void dispute(const DeltaDispute& d);
  bool disputes_pending() const { return !unfiled_.empty(); }
  // Puts the disputes not filed yet; one that fails throws (run it through the gate) and stays queued.
  void file_disputes(ControlPlane& control, const RoundKeys& keys);
  // Disputes other sites filed, read since the last call (each site's first only).
  std::vector<DeltaDispute> take_disputes() { return std::exchange(read_disputes_, {}); }
  // The sites' vouches read since the last take (each under its own site's key, vouches.hpp).
  std::vector<Vouch> take_vouches() { return std::exchange(read_vouches_, {}); }
  bool banned(const std::string& site) const { return banned_.contains(site); }

  const std::map<DeltaKey, DeltaAnnouncement>& announced() const { return announced_; }
  const std::map<std::string, std::int64_t>& merged() const { return merged_; }
  std::int64_t merged_round(const std::string& site) const;  // -1 before any
  bool refused(const DeltaKey& key) const { return refused_.contains(key) || banned(key.first); }
  // The announcement of `key` as read (not merged yet), or null.
  const DeltaAnnouncement* announcement(const DeltaKey& key) const {
    const auto it = announced_.find(key);
    return it == announced_.end() ? nullptr : &it->second;
  }
  // `site`'s newest round refused for its values and not merged (no commit took a later one).
  std::optional<std::int64_t> newest_refused(const std::string& site) const;
  // Every round refused here: for bad values, or announced by a site caught equivocating.
  std::set<DeltaKey> refusals() const;
  bool finished(const std::string& site) const { return final_round_.contains(site); }
  std::int64_t peers_newest_round() const { return peers_newest_round_; }
  void fill(CommitView& view) const;

 private:
  void note(const DeltaAnnouncement& a);  // its final round, its round's tokens
  void read_dispute(const std::string& key, const std::string& value, const RoundKeys& keys);

  std::string site_;
  std::map<DeltaKey, DeltaAnnouncement> announced_;  // not merged yet
  std::int64_t revision_ = 0;                         // control-plane revision read up to
  std::map<std::string, std::int64_t> merged_;        // per site, the newest round merged
  std::set<DeltaKey> refused_;
  std::map<std::string, std::int64_t> final_round_;   // by site, from its final announcement
  std::int64_t peers_newest_round_ = -1;
  std::map<std::string, std::pair<std::int64_t, double>> round_tokens_;  // by site: its newest round, one round's tokens
  std::map<std::string, DeltaDispute> banned_;  // by the site caught: the first dispute of it
  std::vector<DeltaDispute> unfiled_, read_disputes_;
  std::vector<Vouch> read_vouches_;
};

}  // namespace meridian
