#pragma once
// A site's replicas share each round attempt's Update over their group's Communicator: one
// broadcast of a header of known size (the kind, the figures, the fragments), and one of the
// payload when there is one (a commit's mean, or a sharded site's deltas still encoded; a peer's
// state). Two collectives per version.
#include <cstddef>
#include <vector>

#include "crosssite/round/replica_channel.hpp"
#include "intrasite/comm/communicator.hpp"

namespace meridian {

class GroupChannel final : public ReplicaChannel {
 public:
  // `fragments`: the job's (a commit names at most that many). Rank 0 leads.
  GroupChannel(Communicator& group, bool leader, int fragments) : group_(group), leader_(leader), fragments_(fragments) {}
  bool leader() const override { return leader_; }
  void share(Update& update) override;

 private:
  Communicator& group_;
  bool leader_;
  int fragments_;
  std::vector<std::byte> header_;
};

}  // namespace meridian
