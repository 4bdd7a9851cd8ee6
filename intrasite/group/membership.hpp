#pragma once
// Who trains together in a site, decided by the site agent as a pure function of what it has
// observed (torchft's quorum idea): no clocks, sockets or sleeps inside, so every rule is tested
// directly. The agent publishes each decision as a numbered generation in the site's store;
// replicas connect under that generation's prefix, rank = position in `members`.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace meridian {

struct Generation {
  std::int64_t number = -1;  // -1: none published yet
  std::vector<int> members;  // replica slot ids, ascending; rank r is members[r]
  bool operator==(const Generation&) const = default;
};

// What the agent knows about one replica slot at `now` (seconds on the agent's monotonic clock).
struct ReplicaView {
  int id = 0;
  bool running = false;         // its process exists (or, attached, it heartbeats)
  bool ready = false;           // connected to the store and waiting to join a generation
  double last_heartbeat = 0;    // when its heartbeat last changed
  std::optional<double> failed_at;  // when it reported a failed collective in the current generation
  bool beating = true;              // has sent a heartbeat since its process started
};

struct MembershipOptions {
  double heartbeat_timeout_s = 10;  // a running replica silent this long is hung: evict it
  double failure_grace_s = 2;       // after a first failure report, how long members may take to report too
  int min_members = 1;              // below this the site cannot train: wait rather than form a group
  // A running replica not beating yet may stay silent this long after its start: starting takes
  // longer than a beat's interval (loading the program and its libraries, reading the job), more so
  // on a loaded machine.
  double first_beat_timeout_s = 30;
};

struct MembershipDecision {
  std::vector<int> evict;              // kill these (hung, or silent after a failure); restarts are separate
  std::optional<Generation> next;      // publish this generation
  std::string reason;                  // for events.jsonl
};

// How long a running replica may stay silent before it counts as hung.
double allowed_silence(bool beating, const MembershipOptions& options);

MembershipDecision decide_membership(double now, const Generation& current, const std::vector<ReplicaView>& replicas,
                                     const MembershipOptions& options);

}  // namespace meridian
