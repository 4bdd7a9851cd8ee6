#pragma once
// How the leader of a site's replicas hands each attempt's Update to the others: GroupChannel
// over the site's Communicator (sites/replica), or the simulator's replicas in one thread.
#include "crosssite/round/update.hpp"

namespace meridian {

class ReplicaChannel {
 public:
  virtual ~ReplicaChannel() = default;
  virtual bool leader() const = 0;
  // Every replica calls it together: the leader's `update` goes to the others, whose own is
  // replaced by it (fragments: at most the job's, distinct). A short wait: the leader calls it
  // right after its look at the other sites, however long the round takes.
  virtual void share(Update& update) = 0;
};

}  // namespace meridian
