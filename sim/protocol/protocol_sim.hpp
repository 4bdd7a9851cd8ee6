#pragma once
// The deterministic protocol simulator (docs/simulator.md): N sites' real cross-site round code (RoundDriver, CrossSite,
// OuterState, the commit rule, the codecs) in one thread, on one virtual clock, over an in-memory
// control plane and a simulated network, under a random fault schedule drawn from one seed. A
// seed costs milliseconds and replays bit-exactly: `meridian-protosim --seed N --trace` prints what
// every site did. After the run the Checker judges the invariants; liveness is judged here.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/protocol/fault_plan.hpp"
#include "sim/protocol/sim_site.hpp"

namespace meridian {

struct SimOptions {
  int sites = 3;
  int faults = 24;
  std::int64_t rounds = 24;
  double tick_s = 0.05;  // how often each site looks, in virtual seconds
  double lease_ttl_s = 2;
  // CrossSiteOptions::end_unreachable_s ([control] end_unreachable_s); 0, as drawn seeds run: their
  // faults all heal, and each site ends on the log's last version.
  double end_unreachable_s = 0;
  int fragments = 0;  // Streaming DiLoCo's P; 0: drawn per seed from 1, 2 and 4 (overlapped seeds)
  // The job's first rounds half as long ([outer] early_inner_steps, early_steps); with them, every
  // seed runs DiLoCo (one fragment), as the job file requires.
  int early_rounds = 0;
  // The split exchange (SimJob::split); unset: drawn per seed, for half of them.
  std::optional<bool> split;
  // The outer state sharded between each site's replicas (SimJob::shard_outer): every seed then
  // splits its exchange, runs one fragment, overlaps without the eager estimate, and has a model
  // of kSimShardedParams values.
  bool shard_outer = false;
  int replicas = 0;  // with shard_outer: every site's replicas; 0: drawn per site from 2 and 3
  int replica_deaths = 3;  // with shard_outer: member replicas that die alone, besides `faults`
  int leader_deaths = 2;   // ... and leaders (whichever replica leads its site then)
  int outer_flips = 0;     // bits flipped in a site's outer weights (Fault::OuterFlip), besides `faults`
  int rewrites = 0;        // committed records written over (Fault::RewriteCommit), besides `faults`
  SimMutations mutations;
  bool trace = false;
  // Set: exactly these faults (a scenario a test states), in place of `faults` drawn from the seed.
  std::optional<std::vector<Fault>> plan;
};

// A version as the sites applied it, and when the first of them did (virtual seconds).
struct SimCommit {
  CommitRecord record;
  double at = 0;
};

struct SimOutcome {
  std::uint64_t seed = 0;
  std::vector<std::string> violations;
  std::vector<std::string> trace;  // with SimOptions::trace
  double virtual_s = 0;            // when the last site finished (or the run gave up)
  double liveness_bound_s = 0;     // by when after the last fault every site had to finish
  int faults = 0;
  std::int64_t versions = 0;
  std::uint64_t overflowed = 0;  // transfers dropped at a receiver's full queue (SimNetworkOptions)
  bool overlap = true;
  int fragments = 1;
  bool split = false;
  std::uint64_t assembled = 0;  // split: deltas the sites put together from stripes
  bool shard_outer = false;
  std::vector<int> replicas;        // ... each site's
  std::uint64_t held_in_parts = 0;  // ... and with shard_outer: held in parts, never put together
  std::uint64_t regroups = 0;       // ... and the sites' groups re-formed on a failed collective
  std::uint64_t refetches = 0;      // ... and catch-ups after a part a commit named was not kept
  std::uint64_t replica_deaths = 0;  // ... and replicas that died alone
  std::uint64_t leader_deaths = 0;   // ... those of them that led their site
  std::uint64_t mirror_cuts = 0;     // ... and formations that took a dead replica's part from a mirror
  std::int64_t rounds_dropped = 0;  // rounds the sites dropped as lost (no version could merge them)
  std::uint64_t states_adopted = 0;  // versions the sites took as a peer's state, not from deltas
  std::uint64_t diverged = 0;        // times a site found its copy of the outer state wrong (version_diverged)
  std::uint64_t rebuilt = 0;         // ... and rebuilt it from its own disk (copy_rebuilt)
  std::uint64_t rewritten = 0;       // commit records written over (Fault::RewriteCommit)
  std::uint64_t contradicted = 0;    // records a site refused because a vouch contradicted them
  std::vector<SimCommit> history;  // by version, from 1
  bool ok() const { return violations.empty(); }
};

SimOutcome simulate(std::uint64_t seed, const SimOptions& options);

}  // namespace meridian
