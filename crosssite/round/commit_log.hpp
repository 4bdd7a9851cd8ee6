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
// apply two records of one version.
#include <cstdint>
#include <map>
#include <optional>
#include <string>

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

 private:
  // True for the first readable record of its version; a different one later is an event.
  bool first_read(const std::string& key, const std::string& value, const CommitRecord& record,
                  CrossSiteEvents& events);

  RoundKeys keys_;
  int fragments_;
  std::map<std::int64_t, CommitRecord> commits_;
  bool keeps_held_ = false;
  std::optional<std::int64_t> held_from_;      // the oldest version kept, once the site held one
  std::map<std::int64_t, CommitRecord> held_;  // the versions kept that the site holds or held
  std::int64_t revision_ = 0;
  std::int64_t newest_ = 0;
  std::map<std::int64_t, std::string> unreadable_;  // by version: the bytes found there
  std::map<std::int64_t, Digest> first_read_;       // by version: the SHA-256 of its first readable record
};

}  // namespace meridian
