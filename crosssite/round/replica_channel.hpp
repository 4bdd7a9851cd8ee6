#pragma once
// How the leader of a site's replicas hands each attempt's Update to the others: GroupChannel
// over the site's Communicator (sites/replica), or the simulator's replicas in one thread.
#include <cstdint>

#include "crosssite/round/update.hpp"

namespace meridian {

class ReplicaChannel {
 public:
  virtual ~ReplicaChannel() = default;
  virtual bool leader() const = 0;
  // Every replica calls it together: the leader's `update` goes to the others, whose own is
  // replaced by it (fragments: at most the job's, distinct). A short wait: the leader calls it
  // right after its look at the other sites, however long the round takes. `previewed`: the
  // version this replica holds a good preview of (a sharded site's own proposal, on the part and
  // mirror it holds now), -1 for none: a proposed commit's deltas need not reach replicas that all
  // hold one (a channel may send them all the same).
  virtual void share(Update& update, std::int64_t previewed) = 0;
};

}  // namespace meridian
