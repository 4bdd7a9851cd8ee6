#pragma once
// The job's commit log as one site has read it from the control plane: the records of versions it
// does not hold yet, the newest version any site committed, and unreadable records. Nobody can
// have applied a record nobody can read; left alone it would stop the job's versions there for
// good, so a proposal may replace it by compare-and-swap, unless a newer commit shows that its
// version was committed (and maybe applied) before the damage.
// The protocol never writes a second readable record over a first (create_if_absent, or a swap
// for junk), but etcd's auth cannot forbid it to a member (docs/security.md): a version's first
// readable record is the one this site keeps, and a different one read later is an event
// (`commit_rewritten`), never applied, so two sites that read the log at different times cannot
// apply two records of one version; a site that reads a version first after the rewrite is held to
// its peers' vouches (vouches.hpp).
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/util/digest.hpp"
#include "crosssite/control/control_plane.hpp"
#include "crosssite/round/cross_site_types.hpp"
#include "crosssite/round/records.hpp"

namespace meridian {

class CommitLog {
 public:
  CommitLog(std::string job, int fragments) : keys_(std::move(job)), fragments_(fragments) {}
  const RoundKeys& keys() const { return keys_; }

  // Reads the records written since the last read; each unreadable one is an event.
  void read(ControlPlane& control, CrossSiteEvents& events);
  // Creates `version` with `record`, or replaces an unreadable record there. True when this
  // site's record is the one in the control plane now (a lost answer reads as false: the caller
  // reads the log back).
  bool claim(ControlPlane& control, std::int64_t version, const std::string& record, const std::string& site,
             CrossSiteEvents& events);

  // The records this site applied before it restarted, as its journal kept them
  // (DeltaJournal::records): each is the one read of its version, as if just read, so another
  // found there now is a rewrite (put back by repair once the site holds it). One the journal
  // damaged is passed over: the log's is read instead. newest() stays what the control plane
  // shows (a relaunch starts a fresh one: the job's sites are waited for again).
  void recall(const std::map<std::int64_t, std::string>& applied);
  // The bytes of a record read (or recalled) and not dropped yet; null otherwise.
  const std::string* bytes(std::int64_t version) const;

  const CommitRecord* find(std::int64_t version) const;
  // Drops the records of versions before `version` (the site holds them); returns the one of
  // `version - 1` if it was still here (what the site holds: a restarted site learns from it).
  std::optional<CommitRecord> forget_before(std::int64_t version);
  std::int64_t newest() const { return newest_; }

  // The record of the version held is kept (its copy may be replaced by another of that version).
  // With keep_held, so are those of every version held since the first one here, then since the
  // version the site's checkpoint holds (keep_from): a copy of the outer state rebuilt from that
  // checkpoint replays them (crosssite/round/rebuilt_copy.hpp).
  void keep_held() { keeps_held_ = true; }
  void keep_from(std::int64_t version);
  // A version's record: one not held yet, or one kept; null otherwise.
  const CommitRecord* record(std::int64_t version) const;

  // The SHA-256 of the first readable record of `version` this site read (the one it keeps).
  std::optional<Digest> digest(std::int64_t version) const;
  // Where the chain that `digest`, the record of `vouched` as another site read it, heads
  // (CommitRecord::previous down to `version`) leaves the records this site read: the first
  // version on the way down whose record here is another, and why. Nothing when the record of
  // `version` is on it, or this site cannot tell yet (a record between not read here, or one from
  // before the chain).
  struct Contradiction {
    std::int64_t version = 0;
    std::string why;
  };
  std::optional<Contradiction> contradiction(std::int64_t version, std::int64_t vouched, const Digest& digest) const;
  // A site that restarted from its disk holds `version` without having applied a record here; its
  // own vouch names the one it applied (`digest`). That is the version's record from now on, the
  // one this site's proposals chain onto (CommitRecord::previous), and one written over it is not
  // put back from here (repair); another read there is forgotten, and its SHA-256 returned.
  std::optional<Digest> held_as(std::int64_t version, const Digest& digest);
  // A record this site read that a vouch contradicts is forgotten: the one put back there is read
  // afresh (repair below), and judged again.
  void forget_read(std::int64_t version);
  // A record written over one this site applied and still keeps (the version held; with keep_held
  // those since its checkpoint's) is put back by compare-and-swap, once (the sites that read it
  // afresh then find what their peers applied): `commit_restored` events. Those whose swap fails
  // (changed again since) are dropped; a failing call throws, the rest kept.
  void repair(ControlPlane& control, CrossSiteEvents& events);

 private:
  // True for the first readable record of its version; a different one later is an event.
  bool first_read(const std::string& key, const std::string& value, const CommitRecord& record,
                  CrossSiteEvents& events);

  RoundKeys keys_;
  int fragments_;
  std::map<std::int64_t, CommitRecord> commits_;
  std::map<std::int64_t, std::string> bytes_;         // of the records in commits_ and held_, as read
  std::map<std::int64_t, std::string> written_over_;  // by version: the other bytes read there since
  std::set<std::int64_t> repaired_;                   // versions put back once already
  bool keeps_held_ = false;
  std::optional<std::int64_t> held_from_;      // the oldest version kept, once the site held one
  std::map<std::int64_t, CommitRecord> held_;  // the versions kept that the site holds or held
  std::int64_t revision_ = 0;
  std::int64_t newest_ = 0;
  std::map<std::int64_t, std::string> unreadable_;  // by version: the bytes found there
  std::map<std::int64_t, Digest> first_read_;       // by version: the SHA-256 of its first readable record
};

}  // namespace meridian
