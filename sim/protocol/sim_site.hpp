#pragma once
// One site of the protocol simulator: the real OuterState and RoundDriver of each of a site's
// replicas, and the real CrossSite of the one that leads (the lowest live one: a replica that comes
// to lead builds one, as a real replica does), over a MemoryControlPlane client and a SimLink,
// driven by the simulator's ticks instead
// of a replica loop: one step of synthetic training when its time comes, one attempt of the round
// per tick while the round waits. Training is synthetic and deterministic: each step adds a fixed
// pseudo-random amount to the site's working weights, so every delta's expected content is known
// (Checker::submitted). What a crash loses and a restart restores is what a real site's would: the
// process's memory goes, its disk (the state after an exchange, written every third one as a
// checkpoint would be) stays unless the fault says otherwise.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crosssite/control/memory_control_plane.hpp"
#include "crosssite/outer/outer_state.hpp"
#include "crosssite/round/cross_site.hpp"
#include "crosssite/round/round_driver.hpp"
#include "sim/protocol/checker.hpp"
#include "sim/protocol/sim_shards.hpp"
#include "sites/replica/group_channel.hpp"
#include "transport/link/lane.hpp"
#include "transport/link/sim_link.hpp"
#include "transport/link/striped_link.hpp"

namespace meridian {

// Version 0: the weights every simulated site starts from.
std::vector<float> sim_initial_weights(std::size_t n);
// The job's P fragments of those weights: contiguous, the last one takes the remainder.
FragmentPlan sim_fragments(std::size_t n, int fragments);

// Deliberate bugs the simulator's tests must catch, each made on a seam: the sites' control plane
// and link (mutant_seams.hpp), the simulator's own driver, or crosssite's link-time switch
// (mutants.hpp, turned on by simulate() for the run).
struct SimMutations {
  bool unverified_deltas = false;  // Mutant::UnverifiedDeltas: a delta used without checking its digest
  bool overwrite_commits = false;  // a proposal overwrites a version's record instead of creating it
  bool reapply_adopted = false;    // after adopting a peer's state, its version comes again as a commit
  bool skip_rebase = false;        // Mutant::SkipRebase: a commit does not rebase the in-flight round
  bool rebase_wrong_fragment = false;  // Mutant::RebaseWrongFragment: fragment 0 rebased, not the commit's
  bool unbounded_backlog = false;  // Mutant::UnboundedBacklog: an overlapped site never waits on its backlog
  bool keep_last_part = false;     // Mutant::KeepLastPart: a later copy of a kept part replaces it (shard_outer)
  bool ignore_vouches = false;     // Mutant::IgnoreVouches: a record written over is applied by whoever reads it first
  bool keep_dropped_round = false;  // Mutant::KeepDroppedRound: a lost round's progress stays in the weights
  bool never_renew_lease = false;  // nobody keeps the membership lease alive
  bool recordless_journal = false;  // the journals keep no commit records (RecordlessJournal): no bug, an older journal
  // An equivocating site (first) sends one peer (second) other bytes than it announced, under the
  // same announcement and with chunk checks that pass: the peers must catch it and refuse it.
  std::pair<std::string, std::string> equivocation;
};

struct SimJob {
  std::string name = "sim";
  std::vector<std::string> sites;
  std::size_t params = 32;
  std::int64_t rounds = 24;  // every site's exchanges, the last one final (it sends every fragment)
  double round_s = 1.0;      // the steps between two exchanges (two), in virtual seconds
  int fragments = 1;         // Streaming DiLoCo's P: an exchange sends one fragment
  int early_rounds = 0;      // the first rounds, of half the steps (RoundPlan::early_steps)
  bool overlap = true;
  bool eager = false;        // overlapped rounds start from the estimate of their commit
  // The split exchange ([transport] exchange = "split"): the member replica sends its stripes of
  // each delta on a lane of its own and hands its leader those it receives, after every call.
  bool split = false;
  // With a split exchange: DiLoCo's outer state sharded among the replicas ([parallel]
  // shard_outer; sim_shards.hpp), peers' deltas taken in parts. One fragment, no eager overlap.
  bool shard_outer = false;
  // Each site's replicas, by the order of `sites`: 2 where it says nothing (with the outer state
  // whole, always 2).
  std::vector<int> replicas;
  std::uint64_t seed = 0;
  OuterOptions outer;
  CrossSiteOptions cross;  // the protocol's timings; job, site and sites are filled in per site
  SimMutations mutations;
};

// Faults of the control plane that hold now, per site; each client takes them on (re)start.
struct ControlFaultState {
  int outages = 0;  // while > 0, no site reaches the control plane
  std::map<std::string, double> lost_reply, late_write, slow_reply_s;
};

// What every site shares: the world's clock, control plane and network, the checker, the trace.
struct SimWorld {
  const SimJob& job;
  ControlFaultState& faults;
  ManualClock& clock;
  MemoryStore& store;
  SimNetwork& network;
  Checker& checker;
  std::function<void(const std::string&)> trace;  // empty: no trace kept
};

class SimSite final : private RoundEvents {
 public:
  SimSite(SimWorld& world, std::string name);
  ~SimSite() override;

  void tick();  // one look, when the site runs (not crashed, not stopped)
  void renew_lease();  // the keeper's beat: once a second of virtual time

  void crash();                 // the process dies; its disk stays
  void restart(bool lose_disk);
  bool down() const { return !incarnation_; }
  // The version it holds; -1 while down. On its disk: what a restart would come back with.
  std::int64_t version() const;
  std::int64_t disk_version() const;
  bool done() const { return done_; }
  void stop(bool stopped) { stopped_ = stopped; }  // SIGSTOP / SIGCONT
  bool stopped() const { return stopped_; }
  void cut_off(bool cut);  // partition: its link and its control-plane client, both ways
  void apply_faults();     // takes on the world's control-plane faults and its own cut
  void drain();
  void resume();
  void pause_outer(bool paused);
  void rollback();  // to the newest version it holds, between two steps: the in-flight round is dropped
  void spike();     // its next step of training is far out of line (a loss spike)
  // A bit of its outer weights flips in every replica's copy (silent corruption of a whole state):
  // the weight at `where` (in [0, 1)) of the way through them.
  void flip_outer(double where);
  // With the outer state sharded: replica `replica` dies alone, and the group re-forms without it,
  // its part from its predecessor's mirror. The leader's death (replica 0, or the lowest live one)
  // makes the next replica lead, with a leader side of its own; the last live replica does not
  // die alone (that is the site's crash).
  void kill_replica(int replica);
  // The replica that leads now (-1: the site is down, or its outer state is whole).
  int leader_replica() const;
  // ... and comes back as a new process, its training healed from the leader's, its outer part
  // from its own disk (or none: `lose_disk`); the group re-forms with it, led by it if it is the
  // lowest live replica.
  void restart_replica(int replica, bool lose_disk);
  std::string describe() const;
  // Split exchange: the deltas put together from stripes here, over every incarnation (as of each's last call).
  std::uint64_t assembled() const { return assembled_; }
  // ... and with the outer state sharded: those held in parts, the group's re-formations, and
  // the catch-ups after a part a commit named was no longer kept.
  std::uint64_t held_in_parts() const { return held_in_parts_; }
  std::uint64_t regroups() const { return regroups_; }
  std::uint64_t refetches() const { return refetches_; }
  // ... and the replicas that died alone (those that led among them), and the formations that
  // took a part from a mirror.
  std::uint64_t replica_deaths() const { return replica_deaths_; }
  std::uint64_t leader_deaths() const { return leader_deaths_; }
  std::uint64_t mirror_cuts() const { return mirror_cuts_; }
  // The versions it took as a peer's state instead of applying their deltas.
  std::uint64_t states_adopted() const { return states_adopted_; }
  // The times it found its copy of the outer state wrong (a version_diverged event).
  std::uint64_t diverged() const { return diverged_; }
  // ... and the versions it took rebuilt from its disk and journal (not counted as adopted).
  std::uint64_t rebuilt() const { return rebuilt_; }
  // The records it refused because a vouch contradicted them (a commit_contradicted event).
  std::uint64_t contradicted() const { return contradicted_; }

 private:
  struct Lease;
  struct Incarnation;
  struct Disk;
  class Steps;
  struct LeaderSide;
  struct Process;
  enum class Phase { Joining, CatchingUp, TakingUp, Training, Draining, Ending };
  Disk initial_disk() const;  // version 0, step 0: what a site without a disk starts from
  void start();
  // A replica's state after the group's heal (intrasite/group/state_sync): its outer part from
  // its `own` disk, its training the leader's.
  static Disk healed(const Disk& own, const Disk& leader);
  // Replica `replica` of `inc`, a new process from `disk`.
  std::unique_ptr<Process> new_process(Incarnation& inc, int replica, const Disk& disk);
  // The lowest live replica leads: it builds a leader side unless it has one, every other replica
  // lets go of its own, and each driver follows. Made for it: a new control-plane client, link and
  // CrossSite, as a real replica's first lead makes them.
  void take_lead();
  std::unique_ptr<LeaderSide> make_leader_side(Incarnation& inc, Process& process, int replica);
  void join();
  void train_step();
  void attempt();
  void wait_ended();
  void roll_back();  // the operator's rollback, taken up
  // One call of the round on each of the site's live replicas, the leader's first; then they must hold
  // the same version, weights and step, and the working weights must be the round's start less
  // the progress in flight.
  void on_replicas(const std::function<void(RoundDriver&, Replica&)>& call);
  // The split exchange's collective after a call: the leader's orders to the member's lane, the
  // stripes its lane took in to the leader, and both told the peers' lanes.
  void sync_lanes();
  // With the outer state sharded: each live replica's side, and the leader's for the lanes.
  SimShards::Sides sides();
  LaneLeader lane_leader();
  // A collective failed: the replicas re-form, cut the outer state anew and join again, as a real
  // site's group does.
  void regroup(const Error& e);
  // The live replicas form their group again and the site joins again; no formation after the
  // first may fall back to an older state (a part and its mirror never die together here).
  void reform();
  // A formation took an older state than the newest the replicas held (a part and its mirror
  // gone): the cut dropped the round in flight from the working weights, and so from its progress.
  void dropped_by_cut();
  // A part a commit names is no longer kept: the leader lets go of what it holds in parts (each
  // asked for whole again) and the site catches up, as a real site's does (SiteExchange::drive).
  void refetch(const PartsNotKept& e);
  // The outer states that hold the model's values: the leader's, and with the outer state sharded
  // every live replica's part, in rank order.
  std::vector<const OuterState*> held_states() const;
  // The sharded replicas' checks after a call: each mirror holds what its owner holds.
  bool mirrors_hold() const;
  // The site's whole outer weights: the leader's, or the replicas' parts put together.
  std::vector<float> whole_global() const;
  void check_weights();
  void save_disk();
  void log_events();
  void say(const std::string& what) const;

  // RoundEvents: what the site's round did, for the checker and the trace.
  void looked() override { log_events(); }
  void submitted(const DeltaAnnouncement& a, std::span<const std::byte> encoded) override;
  void applied(const AppliedVersion& v) override;
  void dropped(std::int64_t round, std::int64_t step, std::int64_t version, int in_a_row) override;
  void fast_forwarded(std::int64_t from_step, std::int64_t step) override;
  void caught_up(std::int64_t from_version, std::int64_t version, double seconds) override;

  SimWorld& world_;
  std::string name_;
  RoundPlan plan_;
  std::unique_ptr<Disk>
      disk_;  // the latest checkpoint (its leader's): every third exchange, as a real site's is now and then
  std::vector<Disk>
      part_disks_;       // with the outer state sharded, each replica's part of it, by replica (else disk_ serves all)
  int disk_writer_ = 0;  // ... and the replica whose part disk_ holds (it led when disk_ was written)
  std::shared_ptr<MemoryDeltaJournal> journal_ = std::make_shared<MemoryDeltaJournal>();
  std::unique_ptr<Incarnation> incarnation_;
  std::uint64_t incarnations_ = 0;
  std::uint64_t assembled_ = 0, held_in_parts_ = 0, regroups_ = 0, refetches_ = 0, replica_deaths_ = 0,
                leader_deaths_ = 0, mirror_cuts_ = 0, states_adopted_ = 0, diverged_ = 0, rebuilt_ = 0,
                contradicted_ = 0;
  std::optional<std::int64_t> rebuilt_pending_;  // the version of the copy rebuilt, until a state is taken
  bool stopped_ = false, cut_ = false, drained_ = false, paused_outer_ = false, done_ = false, spike_ = false;
};

}  // namespace meridian
