#pragma once
// What the other sites vouch for (MemberRecord::vouched: the newest version each applied and its
// record's SHA-256), judged against the log as this site read it. etcd's auth cannot stop a member
// from writing over a committed record (docs/security.md); a site that reads such a version for
// the first time (it restarted without its disk, or was away) would apply another record than its
// peers did. Down the chain of CommitRecord::previous, a peer's vouch names every record before its
// version: a record it contradicts is never applied, nor a state taken under it, and the site
// waits for a state under a newer record instead. The site's own newest record read heads a
// chain too, so a rewrite of one record alone shows without any peer. A vouch this site cannot
// judge yet (a record between not read here) holds nothing up. A vouch is no member's record: it
// stays in the control plane, and once read here, after its site's lease lapsed or it went down.
// One dishonest member can so hold a site up, but never make it apply a record its peers did not.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "crosssite/round/commit_log.hpp"
#include "crosssite/round/cross_site_types.hpp"
#include "crosssite/round/records.hpp"

namespace meridian {

class Vouches {
 public:
  explicit Vouches(std::string site) : site_(std::move(site)) {}

  // A site's vouch as read (its own key): the newest of each site's stands, this site's own too (an
  // earlier incarnation's).
  void read(const Vouch& vouch);
  // Why `record` is not to be applied (a vouch, or this site's newest record, contradicts it, from
  // the version named on down), or nothing. Each contradiction is a `commit_contradicted` event the
  // first time it is found.
  std::optional<CommitLog::Contradiction> against(const CommitRecord& record, const CommitLog& log,
                                                  CrossSiteEvents& events);
  // The SHA-256 of the record of `version` this site applied, when its own newest vouch read (an
  // earlier incarnation's) is for that version. One for a later version tells nothing of it: that
  // record's CommitRecord::previous is its proposer's word, not this site's.
  std::optional<Digest> own(std::int64_t version) const;

 private:
  std::string site_;
  std::map<std::string, Vouch> read_;                    // each site's newest vouch read
  std::set<std::pair<std::int64_t, std::string>> said_;  // (version, vouching site) already an event
};

}  // namespace meridian
