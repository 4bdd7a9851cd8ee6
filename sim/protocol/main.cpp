// meridian-protosim: runs the protocol simulator over a range of seeds, or one seed with its trace.
//   meridian-protosim --seeds 0:5000 [--sites 3] [--faults 24] [--rounds 24] [--mutation NAME]
//                     [--split on|off]  (the split exchange for every seed, or none; default: half)
//                     [--shard-outer]   (every site's outer state sharded among its replicas, deltas in parts)
//                     [--replicas N]    (with --shard-outer: every site's replicas; default: 2 or 3, drawn)
//                     [--replica-deaths N]  (with --shard-outer: members that die alone, besides the faults; default 3)
//                     [--leader-deaths N]   (... and leaders, whichever replica leads then; default 2)
//                     [--outer-flips N]     (bits flipped in a site's whole outer state, besides the faults; default 0)
//                     [--early-rounds N]    (the job's first N rounds half as long, as [outer] early_steps makes them)
//   meridian-protosim --seed 1234 --trace      (replays that seed exactly and prints what happened)
// Exits 1 when any seed broke an invariant, naming the seed and what broke.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "core/util/error.hpp"
#include "sim/protocol/protocol_sim.hpp"

namespace {

using meridian::SimOptions;

void set_mutation(SimOptions& o, const std::string& name) {
  if (name == "unverified-deltas") o.mutations.unverified_deltas = true;
  else if (name == "overwrite-commits") o.mutations.overwrite_commits = true;
  else if (name == "reapply-adopted") o.mutations.reapply_adopted = true;
  else if (name == "equivocate") o.mutations.equivocation = {"a", "b"};  // an attack the sites must withstand
  else if (name == "skip-rebase") o.mutations.skip_rebase = true;
  else if (name == "rebase-wrong-fragment") o.mutations.rebase_wrong_fragment = true;
  else if (name == "keep-dropped-round") o.mutations.keep_dropped_round = true;
  else if (name == "unbounded-backlog") o.mutations.unbounded_backlog = true;
  else if (name == "never-renew-lease") o.mutations.never_renew_lease = true;
  else if (name == "keep-last-part")
    o.mutations.keep_last_part = true;  // with --shard-outer
  else if (name == "ignore-vouches")
    o.mutations.ignore_vouches = true;  // with --rewrites
  else if (name == "recordless-journal")
    o.mutations.recordless_journal = true;  // no bug: a journal that keeps no commit records (with --rewrites)
  else
    throw meridian::make_error(
        meridian::ErrorKind::Usage, "unknown mutation '", name,
        "' (unverified-deltas, overwrite-commits, reapply-adopted, skip-rebase, rebase-wrong-fragment, "
        "keep-dropped-round, unbounded-backlog, never-renew-lease, keep-last-part, ignore-vouches, recordless-journal, "
        "equivocate)");
}

int run(int argc, char** argv) {
  SimOptions options;
  std::uint64_t first = 0, last = 1000;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw meridian::make_error(meridian::ErrorKind::Usage, arg, " needs a value");
      return argv[++i];
    };
    if (arg == "--seeds") {
      const std::string v = value();
      const auto colon = v.find(':');
      if (colon == std::string::npos) throw meridian::make_error(meridian::ErrorKind::Usage, "--seeds wants FIRST:END, got ", v);
      first = std::stoull(v.substr(0, colon));
      last = std::stoull(v.substr(colon + 1));
    } else if (arg == "--seed") {
      first = std::stoull(value());
      last = first + 1;
    } else if (arg == "--sites") options.sites = std::stoi(value());
    else if (arg == "--faults") options.faults = std::stoi(value());
    else if (arg == "--rounds") options.rounds = std::stoll(value());
    else if (arg == "--mutation") set_mutation(options, value());
    else if (arg == "--trace") options.trace = true;
    else if (arg == "--shard-outer")
      options.shard_outer = true;
    else if (arg == "--replicas")
      options.replicas = std::stoi(value());
    else if (arg == "--replica-deaths")
      options.replica_deaths = std::stoi(value());
    else if (arg == "--leader-deaths")
      options.leader_deaths = std::stoi(value());
    else if (arg == "--outer-flips")
      options.outer_flips = std::stoi(value());
    else if (arg == "--rewrites")
      options.rewrites = std::stoi(value());
    else if (arg == "--early-rounds")
      options.early_rounds = std::stoi(value());
    else if (arg == "--split") {
      const std::string v = value();
      if (v != "on" && v != "off") throw meridian::make_error(meridian::ErrorKind::Usage, "--split wants on or off, got ", v);
      options.split = v == "on";
    }
    else throw meridian::make_error(meridian::ErrorKind::Usage, "unknown argument ", arg);
  }
  // Sharded, the simulator's check that every mirror equals its part after each call does not hold
  // under damaged memory (a replica restarted without its disk takes its part as built, its mirror
  // keeps the flip), which a real site repairs at its next version (RoundDriver::repair_mirrors).
  if (options.outer_flips > 0 && options.shard_outer)
    throw meridian::make_error(meridian::ErrorKind::Usage,
                               "--outer-flips flips bits of whole outer states: not with --shard-outer");
  const auto began = std::chrono::steady_clock::now();
  std::uint64_t failed = 0, versions = 0, overflowed = 0, seeds_overflowed = 0;
  std::uint64_t streaming = 0, versions_past_fragment0 = 0, dropped = 0, held_in_parts = 0, regroups = 0, refetches = 0;
  std::uint64_t replica_deaths = 0, leader_deaths = 0, mirror_cuts = 0, adopted = 0, diverged = 0, rebuilt = 0,
                rewritten = 0, contradicted = 0;
  for (std::uint64_t seed = first; seed < last; ++seed) {
    const auto outcome = meridian::simulate(seed, options);
    versions += static_cast<std::uint64_t>(outcome.versions);
    overflowed += outcome.overflowed;
    seeds_overflowed += outcome.overflowed > 0;
    streaming += outcome.fragments > 1;
    for (const auto& c : outcome.history)
      versions_past_fragment0 += std::any_of(c.record.entries.begin(), c.record.entries.end(),
                                             [](const auto& e) { return e.fragment != 0; });
    dropped += static_cast<std::uint64_t>(outcome.rounds_dropped);
    held_in_parts += outcome.held_in_parts;
    regroups += outcome.regroups;
    refetches += outcome.refetches;
    replica_deaths += outcome.replica_deaths;
    leader_deaths += outcome.leader_deaths;
    mirror_cuts += outcome.mirror_cuts;
    adopted += outcome.states_adopted;
    diverged += outcome.diverged;
    rebuilt += outcome.rebuilt;
    rewritten += outcome.rewritten;
    contradicted += outcome.contradicted;
    for (const auto& line : outcome.trace) std::cout << line << "\n";
    if (outcome.ok()) continue;
    ++failed;
    std::cout << "seed " << seed << " FAILED (" << outcome.fragments << " fragments, "
              << (outcome.overlap ? "overlapped" : "not overlapped") << (outcome.split ? ", split" : "")
              << (outcome.shard_outer ? ", outer state sharded" : "");
    for (std::size_t i = 0; i < outcome.replicas.size(); ++i)
      std::cout << (i == 0 ? ", replicas " : "/") << outcome.replicas[i];
    std::cout << "; replay: meridian-protosim --seed " << seed << (outcome.shard_outer ? " --shard-outer" : "")
              << " --trace):\n";
    for (const auto& v : outcome.violations) std::cout << "  " << v << "\n";
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  const auto seeds = last - first;
  std::printf("seeds %llu..%llu: %llu run, %llu failed, %d faults each, %.1f versions each on average, %.1f s, %.0f seeds/min\n",
              static_cast<unsigned long long>(first), static_cast<unsigned long long>(last),
              static_cast<unsigned long long>(seeds), static_cast<unsigned long long>(failed), options.faults,
              seeds ? static_cast<double>(versions) / static_cast<double>(seeds) : 0.0, seconds,
              seconds > 0 ? 60.0 * static_cast<double>(seeds) / seconds : 0.0);
  std::printf(
      "streaming (several fragments): %llu seeds; versions applied to fragments other than 0: %llu; "
      "rounds dropped as lost: %llu; peers' states adopted: %llu; copies of the outer state found wrong: %llu (rebuilt "
      "from "
      "the site's own disk: %llu)\n",
      static_cast<unsigned long long>(streaming), static_cast<unsigned long long>(versions_past_fragment0),
      static_cast<unsigned long long>(dropped), static_cast<unsigned long long>(adopted),
      static_cast<unsigned long long>(diverged), static_cast<unsigned long long>(rebuilt));
  if (options.rewrites > 0)
    std::printf("commit records written over: %llu; records refused as a vouch contradicted them: %llu\n",
                static_cast<unsigned long long>(rewritten), static_cast<unsigned long long>(contradicted));
  if (options.shard_outer)
    std::printf(
        "deltas held in parts: %llu; groups re-formed on a failed collective: %llu; catch-ups after a "
        "part not kept: %llu; replicas that died alone: %llu (%llu leading); formations that took a part from a "
        "mirror: %llu\n",
        static_cast<unsigned long long>(held_in_parts), static_cast<unsigned long long>(regroups),
        static_cast<unsigned long long>(refetches), static_cast<unsigned long long>(replica_deaths),
        static_cast<unsigned long long>(leader_deaths), static_cast<unsigned long long>(mirror_cuts));
  std::printf("transfers dropped at a full queue: %llu, in %llu seeds\n", static_cast<unsigned long long>(overflowed),
              static_cast<unsigned long long>(seeds_overflowed));
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const meridian::Error& e) {
    std::cerr << "meridian-protosim: " << e.what() << "\n";
    return meridian::exit_code(e.kind());
  } catch (const std::exception& e) {
    std::cerr << "meridian-protosim: " << e.what() << "\n";
    return 2;
  }
}
