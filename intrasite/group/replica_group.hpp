#pragma once
// A replica's side of site membership: wait for the agent to publish a generation that lists it,
// connect to that generation's members, and report a failed collective so the agent can regroup.
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "intrasite/comm/communicator.hpp"
#include "intrasite/comm/gloo_communicator.hpp"
#include "intrasite/comm/store.hpp"
#include "intrasite/group/membership.hpp"

namespace meridian {

class ReplicaGroup {
 public:
  // `nccl_device`: the replicas of a GPU site all-reduce over NCCL, this replica on that CUDA
  // device (with options.timeout); none: over Gloo (TCP).
  // `clock`: monotonic seconds, for the join's deadline.
  ReplicaGroup(Store& store, int id, GlooOptions options, std::function<double()> clock,
               std::optional<int> nccl_device = std::nullopt);

  // Announces that this replica is ready, then waits for generations from `from` on until one lists
  // it, and meets its members there. Without `from` (a process joining for the first time, maybe a
  // restart), generations already published are stale and only later ones count.
  //
  // Meeting has two stages. Each member first marks its arrival and waits for the others' within
  // `timeout`: a member still training in the previous generation arrives at its next step
  // boundary, however long its step, outer round or checkpoint takes. Only then do they connect,
  // within the collective timeout, all of them present. A generation the agent supersedes before
  // it is met is left at once for the newer one (its members meet there instead of waiting out
  // each other's timeouts in different generations); a connect that fails in a generation still
  // current is reported as a failed collective, and the replica waits for the agent's next one.
  // Error(Timeout) when no generation that lists it is met within `timeout`.
  //
  // A store that does not answer (this replica's host cut off from the agent's, which a multi-host
  // site sees when a cable is pulled) is asked again until then: the replica rides out the cut,
  // and the agent admits it again once it is heard.
  void join(std::optional<std::int64_t> from, std::chrono::milliseconds timeout);

  Communicator& comm() { return *comm_; }
  const Generation& generation() const { return generation_; }
  int id() const { return id_; }
  int rank() const { return rank_; }
  int size() const { return static_cast<int>(generation_.members.size()); }
  // Where the group's collectives reach this member: "nccl" or its Gloo listening address.
  std::string transport() const { return nccl_device_ ? "nccl" : "gloo " + options_.address; }

  // Tells the agent that a collective of the current generation failed here; the communicator is
  // dropped (it cannot be used after a failure). When the store does not answer, the report is
  // dropped too: the agent learns of this replica from its silence instead.
  void report_failure();
  // Whether the agent has published a generation after the current one (a replica joining or a
  // member lost): the group then switches at the next step boundary.
  bool newer_generation_published();
  // Whether the agent has published any generation yet: before this process first joins, whether
  // its site's group formed without it (a restart beside running replicas, or a late start).
  bool site_group_formed();

 private:
  // Generation `n` once published, announcing this replica again every kAnnounceEvery meanwhile:
  // the agent takes no announcement read while this slot counts as a member for a joiner's (a
  // member moving to a newer generation announces itself too), so a process it has not yet let go
  // of (a cluster launcher's restart of a dead one) is heard once the slot is open.
  Generation await_generation(std::int64_t n, double deadline);
  static constexpr std::chrono::milliseconds kAnnounceEvery{1000};
  // Whether generation `n` has been superseded by a newer one.
  bool superseded(std::int64_t n);
  // Arrival, then the communicator, of generation_ (rank_): the two stages above, through `store`.
  void meet(Store& store, double deadline);
  std::unique_ptr<Communicator> connect(Store& store, const std::string& prefix);
  std::chrono::milliseconds left(double deadline) const;  // until `deadline` on clock_, at least 0
  // `call` on the store, asked again while the store does not answer (Error(Timeout)) and
  // `deadline` has not passed.
  template <class Call>
  auto patiently(double deadline, Call call);

  Store& store_;
  int id_;
  GlooOptions options_;
  std::function<double()> clock_;
  std::optional<int> nccl_device_;
  Generation generation_;
  int rank_ = -1;
  std::unique_ptr<Communicator> comm_;
};

}  // namespace meridian
