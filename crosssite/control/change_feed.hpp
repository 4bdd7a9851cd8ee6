#pragma once
// The control plane's seams that run beside its calls: a feed of what changed (so that a look
// reads only the areas that moved) and a lease that somebody keeps renewing. EtcdWatch and
// LeaseKeeper are etcd's, from their own threads; the protocol simulator's are MemoryChangeFeed
// and leases kept on virtual time. The round code sees only these interfaces.
#include <cstddef>
#include <cstdint>

namespace meridian {

class ChangeFeed {
 public:
  virtual ~ChangeFeed() = default;
  // False while the feed cannot vouch for what it reports (not connected yet, or its stream
  // ended): the reader reads everything then.
  virtual bool watching() const = 0;
  // Moves whenever something under `area` (an index into the areas it was made with) changed.
  // Taken before a read, so that a change landing during the read is seen next time.
  virtual std::uint64_t changes(std::size_t area) const = 0;
};

// A lease somebody keeps renewing for its owner.
class KeptLease {
 public:
  virtual ~KeptLease() = default;
  // A renewal found the lease gone: the owner registers again on a new one.
  virtual bool lost() const = 0;
};

}  // namespace meridian
