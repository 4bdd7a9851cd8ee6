#pragma once
// The protocol simulator's random fault schedule: drawn from the seed, so a run replays exactly.
// Every fault starts and (where it lasts) ends inside the window; the run then checks liveness.
#include <cstdint>
#include <string>
#include <vector>

#include "core/util/rng.hpp"

namespace meridian {

struct Fault {
  enum class Kind {
    Crash,          // the site's process dies; it restarts after `duration`, from its disk or without it
    Stop,           // SIGSTOP for `duration`: a straggler, its lease may lapse
    Partition,      // its link and its control-plane client cut off for `duration`
    Outage,         // no site reaches the control plane for `duration`
    LostReplies,    // a share of its control-plane calls applied with their answers lost
    LateWrites,     // a share of its control-plane writes unanswered and applied up to a second later
    SlowReplies,    // its control-plane answers take long
    MessageFaults,  // transfers lost, duplicated and corrupted, for everyone
    DeleteMember,   // its membership key deleted from the control plane (damage)
    JunkCommit,     // an unreadable record where the next version's commit goes (damage)
    Drain,          // the operator drains the site, and resumes it after `duration`
    PauseOuter,     // the operator pauses its outer exchange for `duration`
    Rollback,       // the operator rolls it back to the newest version it holds
    Spike,          // every site's next step is a thousand times too large: no version can merge those rounds
    ReplicaDeath,   // one of its replicas dies alone; a new one comes after `duration`
    // A bit of its outer weights flips (silent corruption: every replica's copy of a whole state,
    // the leader's part of a sharded one); the next version it applies or proposes finds it.
    OuterFlip,
    // A member writes over the record of the newest version every live site holds with its own
    // (the same deltas and weights, another proposer): etcd's auth cannot forbid it.
    RewriteCommit,
  };
  Kind kind = Kind::Crash;
  double at = 0, duration = 0;
  int site = 0;
  double amount = 0;  // LostReplies, LateWrites: the share; SlowReplies: seconds; MessageFaults: each probability
                      // Crash, ReplicaDeath: 1 when the disk is lost too; OuterFlip: where, in [0, 1)
  int replica = 0;    // ReplicaDeath: which replica (1 and up: a member; kLeader: whichever leads then)
  static constexpr int kLeader = -1;
};

std::string describe(const Fault& fault, const std::vector<std::string>& sites);

// `count` faults over [0, window_s) for `sites` sites, each ended by window_s; no replica deaths.
std::vector<Fault> plan_faults(Rng& rng, int sites, int count, double window_s);

// `count` replica deaths over [0, window_s) among sites of `replicas` replicas each (those of a
// single replica have no member to lose), each ended by window_s: of members, or with `leaders`
// of whichever replica leads its site then.
// `count` bit flips in the sites' outer weights over [0, window_s).
std::vector<Fault> plan_outer_flips(Rng& rng, int sites, int count, double window_s);
// `count` records written over, over [0, window_s).
std::vector<Fault> plan_rewrites(Rng& rng, int count, double window_s);

std::vector<Fault> plan_replica_deaths(Rng& rng, const std::vector<int>& replicas, int count, double window_s,
                                       bool leaders = false);

}  // namespace meridian
