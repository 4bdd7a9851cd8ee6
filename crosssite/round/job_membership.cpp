#include "crosssite/round/job_membership.hpp"

#include <algorithm>
#include <random>

#include "core/util/error.hpp"
#include "transport/link/curve.hpp"

namespace meridian {

JobMembership::JobMembership(JobMembershipOptions options, ControlPlane& control, std::string address)
    : options_(std::move(options)),
      keys_(options_.job),
      control_(control),
      address_(std::move(address)),
      incarnation_(options_.incarnation) {}

JobMembership::~JobMembership() {
  keeper_.reset();
  if (lease_ == 0) return;
  try {
    control_.revoke_lease(lease_);
  } catch (const Error&) {
    // The lease then lapses after its TTL: peers learn the same, only later.
  }
}

MemberRecord JobMembership::record() const {
  return {options_.site, address_, incarnation_, !proposing_ || !announcing_, ended_, lanes_, parts_unit_};
}

void JobMembership::register_site() {
  keeper_.reset();
  if (incarnation_ == 0) incarnation_ = (std::uint64_t{std::random_device{}()} << 32 | std::random_device{}()) | 1;
  const std::int64_t lease = control_.grant_lease(options_.lease_ttl_s);
  record_stale_ = false;
  control_.put(keys_.member(options_.site), encode(record()), lease);
  lease_ = lease;  // registered only once the key is on it: otherwise the next look tries again
  keeper_ = options_.keep_lease(lease);
}

void JobMembership::put_key() {
  try {
    control_.put(keys_.member(options_.site), encode(record()), lease_);
  } catch (const EtcdLeaseGone&) {
    // The lease lapsed (the site stood still past its TTL) before its keeper noticed: a key on it
    // cannot be written, so the site registers on a fresh one. Failing here instead would keep
    // every later look failing the same way, and the site would never come back.
    register_site();
  }
}

void JobMembership::maintain() {
  if (lease_ == 0) return;
  if (!keeper_ || keeper_->lost()) register_site();
  if (!record_stale_) return;
  put_key();
  record_stale_ = false;
}

JobMembership::Change JobMembership::refresh(CrossSiteEvents& events) {
  std::map<std::string, MemberRecord> members;
  for (const auto& [key, value] : control_.get_prefix(keys_.members())) {
    try {
      auto m = decode_member(value);
      // Only configured sites take part; a key under another name is a stranger's.
      if (std::binary_search(options_.sites.begin(), options_.sites.end(), m.site) && names_its_key(m))
        members[m.site] = std::move(m);
    } catch (const Error&) {
      // A record we cannot read is no member; its site looks absent until it writes a good one.
    }
  }
  if (lease_ != 0 && !members.contains(options_.site)) {
    put_key();
    members[options_.site] = record();
    events.push_back({"member_key_restored", options_.site, 0, keys_.member(options_.site)});
  }
  Change change;
  std::vector<std::string> joined;
  for (const auto& [site, m] : members) {
    const auto before = members_.find(site);
    if (site != options_.site && (before == members_.end() || before->second.incarnation != m.incarnation))
      joined.push_back(site);
  }
  members_ = std::move(members);
  for (const auto& site : joined) change.joined.push_back(&members_.at(site));
  const std::size_t known = site_by_addr_.size();
  for (const auto& [site, m] : members_) {
    site_by_addr_[m.address] = site;
    for (const auto& lane : m.lanes) site_by_addr_[lane] = site;  // a split exchange's stripes come from them
  }
  change.new_addresses = site_by_addr_.size() > known;
  return change;
}

bool JobMembership::names_its_key(const MemberRecord& m) const {
  // The job's list of keys says who a site is, not the control plane: a record whose address names
  // another key than its site's would have this site send its deltas to whoever holds that key.
  if (options_.link_keys.empty()) return true;
  const auto it = options_.link_keys.find(m.site);
  if (it == options_.link_keys.end()) return false;
  const auto names = [&](const std::string& address) { return split_curve_address(address).public_key == it->second; };
  return names(m.address) && std::all_of(m.lanes.begin(), m.lanes.end(), names);
}

const std::string* JobMembership::site_at(const std::string& address) const {
  const auto it = site_by_addr_.find(address);
  return it == site_by_addr_.end() ? nullptr : &it->second;
}

std::set<std::string> JobMembership::addresses() const {
  std::set<std::string> addresses;
  for (const auto& [address, site] : site_by_addr_) addresses.insert(address);
  return addresses;
}

std::int64_t JobMembership::leave() {
  keeper_.reset();
  members_.erase(options_.site);
  return lease_.exchange(0);
}

void JobMembership::set_proposing(bool proposing) {
  record_stale_ = record_stale_ || proposing != proposing_;
  proposing_ = proposing;
}

void JobMembership::set_announcing(bool announcing) {
  record_stale_ = record_stale_ || announcing != announcing_;
  announcing_ = announcing;
}

void JobMembership::set_lanes(std::vector<std::string> lanes, std::uint64_t parts_unit) {
  record_stale_ = record_stale_ || lanes != lanes_ || parts_unit != parts_unit_;
  parts_unit_ = parts_unit;
  lanes_ = std::move(lanes);
}

void JobMembership::set_ended(std::int64_t version) {
  record_stale_ = record_stale_ || version != ended_;
  ended_ = version;
}

}  // namespace meridian
