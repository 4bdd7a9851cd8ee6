#pragma once
// Whole states between sites: a site that fell behind (it was away, restarted without its disk, or
// a commit's deltas do not come) adopts a live peer's state instead of replaying versions. This
// holds both sides: the state this site serves (one snapshot per peer per re-request period,
// however often it asks), the newest peer state received (kept until its commit is read, then
// checked against the commit's hash before anyone adopts it), which peer to ask next, and the
// clocks that say when waiting has gone on long enough.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "crosssite/round/cross_site_types.hpp"
#include "crosssite/outer/outer_state.hpp"
#include "crosssite/round/records.hpp"

namespace meridian {

class StateTransfer {
 public:
  StateTransfer(std::function<double()> clock, std::chrono::milliseconds rerequest_after,
                std::chrono::milliseconds catch_up_after);

  void serve(const OuterState* state) { serving_ = state; }
  const OuterState* serving() const { return serving_; }
  // A sharded state's snapshot is put together by the site's replicas when a peer asks
  // (RoundPeers::state_wanted), and goes to the peers waiting for that version or an older one.
  bool assembly_wanted() const { return !awaiting_assembly_.empty(); }
  std::vector<std::pair<std::string, std::shared_ptr<const std::vector<std::byte>>>> assembled(
      std::int64_t version, std::vector<std::byte> snapshot);
  // What to answer a peer at `address` that asks for a version >= min_version: the snapshot and
  // its version, or nothing (this site has no such version, or answered that peer lately).
  std::optional<std::pair<std::int64_t, std::shared_ptr<const std::vector<std::byte>>>> answer(
      const std::string& address, std::int64_t min_version);

  void received(std::int64_t version, const std::string& from, std::vector<std::byte> bytes);
  // Whether a state newer than `version` was received, and its version.
  bool has_newer_than(std::int64_t version) const { return snapshot_ && snapshot_->version > version; }
  std::int64_t received_version() const { return snapshot_ ? snapshot_->version : 0; }
  // Who sent it: a peer's link address, or what received() was told.
  std::string received_from() const { return snapshot_ ? snapshot_->from : std::string(); }
  // Takes the state received, checked against `record` (its commit): its bytes, or nullopt when
  // refused (a `state_refused` event says why).
  std::optional<std::vector<std::byte>> take(const OuterState& state, const CommitRecord& record, CrossSiteEvents& events);
  void drop() { snapshot_.reset(); }  // the state received is not to be taken (its record is contradicted)

  // Whom to ask, in turn (one that died mid-transfer is not the only one asked); null when this
  // site asked lately or has no peer.
  const MemberRecord* next_source(const std::map<std::string, MemberRecord>& members, const std::string& self);

  // The next commit exists but its deltas are not all here (stuck), or the site is versions
  // behind with the next commit's deltas missing (far behind): since when, and whether for
  // catch_up_after already. A version applied ends being stuck.
  void note_stuck() {
    if (!stuck_since_) stuck_since_ = clock_();
  }
  bool stuck_long() const { return stuck_since_ && clock_() - *stuck_since_ >= catch_up_s_; }
  bool far_behind_long(bool far_behind);
  void applied() { stuck_since_.reset(); }

 private:
  // A sharded site's peers waiting for its state, and the version each asked for at least.
  std::map<std::string, std::int64_t> awaiting_assembly_;
  // The snapshot to give the peer at `address` that asks for `min_version` or newer, when there is one now.
  std::optional<std::pair<std::int64_t, std::shared_ptr<const std::vector<std::byte>>>> snapshot_of(
      const std::string& address, std::int64_t min_version);
  struct Snapshot {
    std::int64_t version = 0;
    std::string from;
    std::vector<std::byte> bytes;
  };
  std::function<double()> clock_;
  double rerequest_s_, catch_up_s_;
  const OuterState* serving_ = nullptr;
  std::optional<Snapshot> snapshot_;
  double requested_at_ = -1e300;
  std::size_t source_ = 0;
  std::map<std::string, double> served_at_;
  std::optional<double> stuck_since_, far_behind_since_;
};

}  // namespace meridian
