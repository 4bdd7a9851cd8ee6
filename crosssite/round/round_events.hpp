#pragma once
// What a site's round tells its log (a real site's RunLog events on the leader) or the
// simulator's checker. Called on the leader only, but for `encoded`.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "crosssite/round/records.hpp"

namespace meridian {

struct AppliedVersion {
  bool adopted = false;  // a peer's whole state, not a commit
  std::int64_t step = 0, version = 0, from_version = 0;
  std::vector<int> fragments;
  std::uint64_t params_hash = 0;
  const CommitRecord* record = nullptr;
};

class RoundEvents {
 public:
  virtual ~RoundEvents() = default;
  // After each look at the other sites: what they did is due in the log.
  virtual void looked() {}
  // On every replica but the leader, a delta it encoded (bit for bit the one its leader submits),
  // handed over: in a split exchange each replica sends a share of it (site_lanes.hpp).
  virtual void encoded(std::vector<std::byte>) {}
  virtual void submitted(const DeltaAnnouncement& a, std::span<const std::byte> encoded) = 0;
  virtual void applied(const AppliedVersion& v) = 0;
  virtual void dropped(std::int64_t round, std::int64_t step, std::int64_t version, int in_a_row) = 0;
  virtual void fast_forwarded(std::int64_t from_step, std::int64_t step) = 0;
  virtual void caught_up(std::int64_t from_version, std::int64_t version, double seconds) = 0;
  // A sharded site: the mirrors of `replicas` differed from their owners' parts at `version`, and
  // the parts were cut anew (`bytes` of records received at the leader).
  virtual void mirrors_repaired(const std::vector<int>& /*replicas*/, std::int64_t /*version*/, std::size_t /*bytes*/) {
  }
};

}  // namespace meridian
