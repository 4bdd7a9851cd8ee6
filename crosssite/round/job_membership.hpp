#pragma once
// A site's membership in the job (across sites; intrasite/group/membership is the replicas' within a
// site): its member key on a lease that a keeper renews (registered again whenever the lease is
// lost: a site that was cut off or stood still comes back), its record
// (address, incarnation, whether its outer exchange is paused), and the members as last read.
// Every call here that touches the control plane throws its typed failures; the caller runs it
// through its ControlGate.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "crosssite/control/change_feed.hpp"
#include "crosssite/control/control_plane.hpp"
#include "crosssite/round/cross_site_types.hpp"
#include "crosssite/round/records.hpp"

namespace meridian {

struct JobMembershipOptions {
  std::string job, site;
  std::vector<std::string> sites;  // every site of the job, sorted
  std::int64_t lease_ttl_s = 10;
  // Who renews the membership lease from its grant on (required): a LeaseKeeper thread in a real
  // site, the simulator's beats on virtual time.
  std::function<std::unique_ptr<KeptLease>(std::int64_t lease)> keep_lease;
  std::uint64_t incarnation = 0;  // 0: drawn at random at the first registration
  // Each site's CURVE public key as the job lists it (empty: the links speak no CURVE).
  std::map<std::string, std::string> link_keys;
};

class JobMembership {
 public:
  JobMembership(JobMembershipOptions options, ControlPlane& control, std::string address);
  ~JobMembership();  // revokes the lease, so peers see this site leave at once

  void register_site();  // a fresh lease, the member key on it, its keeper
  bool registered() const { return lease_ != 0; }
  // Registers again when the keeper lost the lease; rewrites the record when it changed.
  void maintain();
  // What a read of the members changed: sites that joined or came back as a new incarnation
  // (this site sends them what they missed). What a restarted site announced before and no longer
  // has, it withdraws itself (Outbox::scan), before it registers.
  struct Change {
    std::vector<const MemberRecord*> joined;
    bool new_addresses = false;  // addresses() grew
  };
  // Reads the members. This site's own key gone (deleted by hand, or replaced by something
  // unreadable) while it holds its lease: it writes the key again, or its deltas would go
  // unmerged for good.
  Change refresh(CrossSiteEvents& events);
  const std::map<std::string, MemberRecord>& members() const { return members_; }
  bool member(const std::string& site) const { return members_.contains(site); }
  // The member site at a link address (its own, or one of its lanes) as last read (null if none),
  // without reading anything.
  const std::string* site_at(const std::string& address) const;
  // Every member's link address read so far, its lanes' too (the link exchanges with these only).
  std::set<std::string> addresses() const;
  // Stops renewing and forgets itself; returns the lease for the caller to revoke (0: none).
  std::int64_t leave();
  void set_proposing(bool proposing);
  bool proposing() const { return proposing_; }
  // Draining: no new round will come. The record's `paused` says so, as for a paused site.
  void set_announcing(bool announcing);
  // A split exchange: the link addresses of this site's replicas 1, 2, ... and the unit its
  // replicas take deltas' parts on (0: none), for its record (written at the next maintain()).
  void set_lanes(std::vector<std::string> lanes, std::uint64_t parts_unit = 0);
  // The version this site ended the job on, for its record (written at the next maintain()).
  void set_ended(std::int64_t version);
  std::int64_t lease() const { return lease_; }  // safe from another thread

 private:
  MemberRecord record() const;
  bool names_its_key(const MemberRecord& m) const;
  void put_key();  // this site's key on its lease, or a new registration when the lease is gone

  JobMembershipOptions options_;
  RoundKeys keys_;
  ControlPlane& control_;
  std::string address_;
  std::atomic<std::int64_t> lease_{0};
  std::uint64_t incarnation_;
  std::unique_ptr<KeptLease> keeper_;
  std::map<std::string, MemberRecord> members_;      // by site
  // Link address -> site. Not cleared when a site leaves: its last delta may still be on its way.
  std::map<std::string, std::string> site_by_addr_;
  std::int64_t ended_ = -1;
  std::vector<std::string> lanes_;
  std::uint64_t parts_unit_ = 0;
  bool proposing_ = true, announcing_ = true, record_stale_ = false;
};

}  // namespace meridian
