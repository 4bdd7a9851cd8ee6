#pragma once
// One site of the protocol simulator: the real CrossSite and OuterState of a site's leader, over
// a MemoryControlPlane client and a SimLink, driven by the simulator's ticks instead of a trainer.
// Training is synthetic and deterministic: each round adds two fixed pseudo-random halves to the
// site's working weights (one mid-round, one at its end), so a commit can land mid-round and every
// delta's expected content is known (Checker::submitted). What a crash loses and a restart
// restores is what a real site's would: the process's memory goes, its disk (the state after its
// latest applied version, written as a checkpoint would be) stays unless the fault says otherwise.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/protocol/checker.hpp"
#include "crosssite/control/memory_control_plane.hpp"
#include "crosssite/round/cross_site.hpp"
#include "crosssite/outer/outer_state.hpp"
#include "transport/link/sim_link.hpp"

namespace meridian {

// Version 0: the weights every simulated site starts from.
std::vector<float> sim_initial_weights(std::size_t n);

// Deliberate bugs the simulator's tests must catch, each made on a seam: the sites' control plane
// and link (mutant_seams.hpp), the simulator's own driver, or crosssite's link-time switch
// (mutants.hpp, turned on by simulate() for the run).
struct SimMutations {
  bool unverified_deltas = false;  // Mutant::UnverifiedDeltas: a delta used without checking its digest
  bool overwrite_commits = false;  // a proposal overwrites a version's record instead of creating it
  bool reapply_adopted = false;    // after adopting a peer's state, its version comes again as a commit
  bool skip_rebase = false;        // a commit does not rebase the in-flight round onto it
  bool never_renew_lease = false;  // nobody keeps the membership lease alive
  // An equivocating site (first) sends one peer (second) other bytes than it announced, under the
  // same announcement and with chunk checks that pass: the peers must catch it and refuse it.
  std::pair<std::string, std::string> equivocation;
};

struct SimJob {
  std::string name = "sim";
  std::vector<std::string> sites;
  std::size_t params = 32;
  std::int64_t rounds = 24;  // every site's rounds, the last one final
  double round_s = 1.0;      // H inner steps, in virtual seconds
  bool overlap = true;
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

class SimSite {
 public:
  SimSite(SimWorld& world, std::string name);
  ~SimSite();

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
  void rollback();  // to the newest version it holds: the in-flight round is dropped
  std::string describe() const;

 private:
  struct Lease;
  struct Incarnation;
  struct Disk;
  void start(const Disk& disk);
  void join();
  void train_half();
  void end_round();
  void apply(CrossSite::Commit& commit);
  void finish();
  void save_disk();
  void log_events();
  void say(const std::string& what) const;

  SimWorld& world_;
  std::string name_;
  std::unique_ptr<Disk> disk_;  // the latest checkpoint: every third round, as a real site's is now and then
  std::shared_ptr<MemoryDeltaJournal> journal_ = std::make_shared<MemoryDeltaJournal>();
  std::unique_ptr<Incarnation> incarnation_;
  std::uint64_t incarnations_ = 0;
  bool stopped_ = false, cut_ = false, drained_ = false, paused_outer_ = false, done_ = false;
};

}  // namespace meridian
