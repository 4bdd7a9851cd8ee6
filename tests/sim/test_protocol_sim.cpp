// The deterministic protocol simulator: the real CrossSite and OuterState of three sites under
// seeded fault schedules (24 faults each), judged by sim/protocol/checker. Each seed costs about
// 10 ms; a failing one replays exactly with `meridian-protosim --seed N --trace`.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <string>

#include "sim/protocol/protocol_sim.hpp"

namespace meridian {
namespace {

std::string report(const SimOutcome& o) {
  std::string s = "seed " + std::to_string(o.seed) + " (meridian-protosim --seed " + std::to_string(o.seed) + " --trace):";
  for (const auto& v : o.violations) s += "\n  " + v;
  return s;
}

// The first seed in [0, limit) whose run breaks an invariant, or -1.
long long first_caught(const SimOptions& options, long long limit) {
  for (long long seed = 0; seed < limit; ++seed)
    if (!simulate(static_cast<std::uint64_t>(seed), options).ok()) return seed;
  return -1;
}

// Seeds 0-299 under `options`, each holding every invariant: their outcomes' counts summed.
SimOutcome swept_300(const SimOptions& options) {
  SimOutcome sum;
  for (std::uint64_t seed = 0; seed < 300; ++seed) {
    const auto outcome = simulate(seed, options);
    INFO(report(outcome));
    REQUIRE(outcome.ok());
    sum.diverged += outcome.diverged;
    sum.rebuilt += outcome.rebuilt;
    sum.rewritten += outcome.rewritten;
    sum.contradicted += outcome.contradicted;
  }
  return sum;
}

}  // namespace

TEST_CASE("protocol simulator: 1,000 seeds with 24 faults each hold every invariant") {
  const SimOptions options;
  std::int64_t versions = 0;
  int split = 0;
  std::uint64_t assembled = 0;
  for (std::uint64_t seed = 0; seed < 1000; ++seed) {
    const auto outcome = simulate(seed, options);
    INFO(report(outcome));
    REQUIRE(outcome.ok());
    CHECK(outcome.faults == 24);
    versions += outcome.versions;
    split += outcome.split ? 1 : 0;
    assembled += outcome.assembled;
  }
  CHECK(versions > 1000 * 20);  // the job gets somewhere under its faults, not just stays safe
  // Half the seeds split their exchange, and most of their deltas went in stripes.
  CHECK(split > 400);
  CHECK(split < 600);
  CHECK(assembled > static_cast<std::uint64_t>(split) * 24);
}

TEST_CASE("protocol simulator: 300 seeds with a bit flipped in a site's outer weights hold every invariant") {
  SimOptions options;
  options.outer_flips = 1;
  const auto sum = swept_300(options);
  // Most flips are found (the others land on a site that is down, or one that takes a peer's state
  // before its next version), and most copies found wrong are rebuilt from the site's own disk
  // (246 and 207 at 2026-12-01).
  CHECK(sum.diverged > 150);
  CHECK(sum.rebuilt > sum.diverged / 2);
}

TEST_CASE("protocol simulator: 300 seeds with a committed record written over hold every invariant") {
  SimOptions options;
  options.rewrites = 1;
  const auto sum = swept_300(options);
  // Most seeds have a version every live site holds to write over; the sites that applied it put
  // it back at once (after a restart, from their journal), and the few that read it first
  // meanwhile refuse it on a vouch (161 and 6 at 2026-12-01).
  MESSAGE(sum.rewritten, " records written over, ", sum.contradicted, " refused on a vouch");
  CHECK(sum.rewritten > 100);
  CHECK(sum.contradicted > 2);
}

// A site that applies the record it reads first, whatever its peers vouch for, takes the version
// another site wrote over: two histories, caught. With journals that keep no commit records, as
// before they did: a site that restarted cannot put back the record it applied, and the vouches
// are all that stands (with records the mutation is caught too, first at seed 162 of 600).
TEST_CASE("protocol simulator: a record written over, applied against its peers' vouches, is caught within 100 seeds") {
  SimOptions options;
  options.rewrites = 1;
  options.mutations.ignore_vouches = true;
  options.mutations.recordless_journal = true;
  const long long seed = first_caught(options, 100);
  CHECK(seed >= 0);
  MESSAGE("vouches ignored: caught at seed ", seed);
}

TEST_CASE("protocol simulator: a seed replays exactly, and another seed is another run") {
  SimOptions options;
  options.trace = true;
  const auto one = simulate(4242, options);
  const auto again = simulate(4242, options);
  REQUIRE(one.trace.size() > 50);
  CHECK(one.trace == again.trace);
  CHECK(one.virtual_s == again.virtual_s);
  CHECK(simulate(4243, options).trace != one.trace);
}

TEST_CASE("protocol simulator: 200 seeds with shorter early rounds hold every invariant") {
  SimOptions options;
  options.early_rounds = 6;
  std::int64_t versions = 0;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    const auto outcome = simulate(seed, options);
    INFO(report(outcome));
    REQUIRE(outcome.ok());
    versions += outcome.versions;
  }
  CHECK(versions > 200 * 20);
  // Without faults every site's rounds are merged: 6 of 2 steps, then 21 of 4 for the job's other
  // 84 steps (rounds 0 to 26), where the job without them has 24.
  const auto last_round = [&](const SimOptions& o) {
    std::int64_t last = -1;
    for (const auto& c : simulate(1, o).history)
      for (const auto& e : c.record.entries) last = std::max(last, e.round);
    return last;
  };
  options.faults = 0;
  CHECK(last_round(options) == 26);
  options.early_rounds = 0;
  CHECK(last_round(options) == 23);
}

TEST_CASE("protocol simulator: two and four sites, and few rounds, hold every invariant too") {
  for (const int sites : {2, 4}) {
    SimOptions options;
    options.sites = sites;
    options.rounds = sites == 2 ? 8 : 24;
    for (std::uint64_t seed = 0; seed < 150; ++seed) {
      const auto outcome = simulate(seed, options);
      INFO("sites=", sites, " ", report(outcome));
      REQUIRE(outcome.ok());
    }
  }
}

// Seeds past the first thousand that found bugs, each fixed since (docs/simulator.md): 38784 and
// 91534 a journal that let go of a site's only copy of its own delta before its checkpoint held it
// (found once the simulated network dropped what a stopped peer's queue had no room for); 334466
// a site a look behind the others when they finished and left, holding the last version's deltas,
// that gave that version up as lost; 326199 a version merging a round its site had let go of from
// memory (it kept sending rounds while far behind) though its journal held it: nobody could apply
// it; the others the bugs found by the long runs before.
TEST_CASE("protocol simulator: the seeds of the bugs found past the first thousand hold every invariant") {
  const SimOptions options;
  for (const std::uint64_t seed : {7599, 16884, 21406, 24667, 25221, 25808, 28744, 29450, 38784, 91534, 100578, 134114,
                                   326199, 334466}) {
    const auto outcome = simulate(seed, options);
    INFO(report(outcome));
    CHECK(outcome.ok());
  }
}

// Damage to the control plane has a defined, visible outcome (issue 16): a site whose member key
// was deleted writes it again, an unreadable record where the next commit goes is replaced by a
// proposal, and both are events; every run still holds every invariant and finishes.
TEST_CASE("protocol simulator: deleted member keys and junk commit records are restored and replaced, visibly") {
  SimOptions options;
  options.trace = true;
  int restored = 0, replaced = 0, unreadable = 0;
  for (std::uint64_t seed = 0; seed < 100; ++seed) {
    const auto outcome = simulate(seed, options);
    INFO(report(outcome));
    REQUIRE(outcome.ok());
    for (const auto& line : outcome.trace) {
      restored += line.find("event member_key_restored") != std::string::npos;
      replaced += line.find("event commit_record_replaced") != std::string::npos;
      unreadable += line.find("event commit_unreadable") != std::string::npos;
    }
  }
  CHECK(restored > 20);
  CHECK(replaced > 5);
  CHECK(unreadable > replaced);  // every site says so; one replaces it
}

// Proof that the checker can fail: each deliberate protocol bug is caught within 200 seeds
// (docs/simulator.md has the share of seeds that catch each).
TEST_CASE("protocol simulator: each of eight protocol mutations is caught within 200 seeds") {
  const std::vector<std::pair<const char*, std::function<void(SimOptions&)>>> mutations = {
      {"a delta used without checking its digest", [](SimOptions& o) { o.mutations.unverified_deltas = true; }},
      // Alone, the sites withstand it (below): the one that applied the record puts it back, and
      // the others refuse the other on its vouch.
      {"a proposal overwrites a version's commit, and no site heeds the vouches",
       [](SimOptions& o) {
         o.mutations.overwrite_commits = true;
         o.mutations.ignore_vouches = true;
       }},
      {"an adopted version handed out again as a commit", [](SimOptions& o) { o.mutations.reapply_adopted = true; }},
      {"a commit does not rebase the round onto it", [](SimOptions& o) { o.mutations.skip_rebase = true; }},
      {"a commit rebases fragment 0, not the one it changed",
       [](SimOptions& o) { o.mutations.rebase_wrong_fragment = true; }},
      {"an overlapped site trains on past its backlog bound",
       [](SimOptions& o) { o.mutations.unbounded_backlog = true; }},
      {"a lost round's progress stays in the weights", [](SimOptions& o) { o.mutations.keep_dropped_round = true; }},
      {"the membership lease never renewed", [](SimOptions& o) { o.mutations.never_renew_lease = true; }},
  };
  for (const auto& [name, mutate] : mutations) {
    SimOptions options;
    mutate(options);
    const long long seed = first_caught(options, 200);
    INFO(std::string(name));
    CHECK(seed >= 0);
    MESSAGE(std::string(name), ": caught at seed ", seed);
  }
}

// A proposer that overwrites the record of its version instead of creating it (a bug, or a member
// that means to) is withstood: every site keeps the first record it read, the sites that applied
// it put it back, and a site that reads the other first refuses it on their vouches.
TEST_CASE("protocol simulator: a proposal that overwrites a version's commit is withstood in 200 seeds") {
  SimOptions options;
  options.mutations.overwrite_commits = true;
  CHECK(first_caught(options, 200) == -1);
}

// Every site's outer state sharded among its 2 or 3 replicas (drawn per site), which run the real
// group code (GroupChannel, the outer cut, SiteLanes, kept parts) on threads taking turns, and
// peers' deltas taken in parts, each cut on its receiver's map, and three member replicas and two
// leaders dying alone. Each seed costs about 0.2 s: the model is three units of the cut (9,192 values).
TEST_CASE("protocol simulator: 100 seeds with the outer state sharded and deltas taken in parts hold every invariant") {
  SimOptions options;
  options.shard_outer = true;
  std::uint64_t held_in_parts = 0, deaths = 0, leaders = 0, from_mirrors = 0;
  std::int64_t versions = 0;
  int uneven = 0;  // seeds whose sites do not all have as many replicas
  for (std::uint64_t seed = 0; seed < 100; ++seed) {
    const auto outcome = simulate(seed, options);
    INFO(report(outcome), " with --shard-outer");
    REQUIRE(outcome.ok());
    CHECK(outcome.shard_outer);
    held_in_parts += outcome.held_in_parts;
    versions += outcome.versions;
    deaths += outcome.replica_deaths;
    leaders += outcome.leader_deaths;
    from_mirrors += outcome.mirror_cuts;
    uneven += std::ranges::count(outcome.replicas, outcome.replicas.front()) != 3 ? 1 : 0;
  }
  CHECK(versions > 100 * 20);
  CHECK(uneven > 50);  // three quarters, drawn
  // Most deltas went in parts (three sites, about 25 rounds each, each delta held at two peers).
  CHECK(held_in_parts > 100 * 50);
  // Three member replicas and two leaders die alone in each seed (none while its site is down, nor
  // its last live replica): each time the survivors take its part from a mirror, and after a
  // leader's death the next replica leads.
  CHECK(deaths > 100 * 3);
  CHECK(leaders > 100);
  CHECK(from_mirrors >= deaths);
}

// One replica of a site dies alone, and a new one takes its place: the group re-forms without it
// (its part from its predecessor's mirror, nothing older taken) and again with it (its training
// healed, its outer part cut anew from the others'), at 2 and 3 replicas a site, from its disk and
// without it, at every moment of a round. The last member, or the `leader`: the next replica then
// leads with a leader side of its own (a new CrossSite, control-plane client and link), and lets
// go of it when the restarted replica leads again.
namespace {
void one_replica_dies(bool leader) {
  int runs = 0;
  for (const int replicas : {2, 3})
    for (int tenth = 31; tenth < 130; tenth += 7)
      for (const bool lose_disk : {false, true}) {
        SimOptions options;
        options.shard_outer = true;
        options.replicas = replicas;
        const int dead = leader ? Fault::kLeader : replicas - 1;
        options.plan =
            std::vector<Fault>{Fault{Fault::Kind::ReplicaDeath, tenth / 10.0, 2.5, 1, lose_disk ? 1.0 : 0.0, dead}};
        const auto outcome = simulate(3, options);
        INFO(replicas, " replicas a site, replica ", dead, " of b dead from ", tenth / 10.0, " s for 2.5 s",
             lose_disk ? ", its disk lost: " : ": ", report(outcome));
        CHECK(outcome.ok());
        CHECK(outcome.replica_deaths == 1);
        CHECK(outcome.leader_deaths == (leader ? 1 : 0));
        CHECK(outcome.mirror_cuts >= 1);
        CHECK(outcome.versions >= 24);
        ++runs;
      }
  CHECK(runs == 2 * 15 * 2);
}
}  // namespace

TEST_CASE("protocol simulator: a member replica that dies alone loses nothing, and its successor joins the job") {
  one_replica_dies(false);
}

TEST_CASE(
    "protocol simulator: a leader that dies alone loses nothing: the next replica leads, then its successor again") {
  one_replica_dies(true);
}

// A replica that let a later copy of a part replace the one its leader judged (a duplicate on the
// way, corrupted, or a peer's second try) fills a commit in from bytes nobody checked: caught.
TEST_CASE("protocol simulator: a kept part replaced by a later copy of it is caught within 100 seeds") {
  SimOptions options;
  options.shard_outer = true;
  // Without replica deaths, whose re-formed groups drop every kept part: 3 seeds of 100 catch it
  // (41 first); with them, 3 of 300 (169 first).
  options.replica_deaths = 0;
  options.leader_deaths = 0;
  options.mutations.keep_last_part = true;
  const long long seed = first_caught(options, 100);
  CHECK(seed >= 0);
  MESSAGE("a kept part replaced by a later copy: caught at seed ", seed);
}

// A site partitioned for most of the job (it trains on alone) and back just as the others end is
// several versions behind and needs one of them to take the last versions or a state from: the
// others stay until it has ended too (EndWaits). Seen in the netns job: the site that came back
// ended versions behind. The sweep moves the partition's end over the job's last seconds, for each
// site; the only runs allowed to end apart are those whose site came back (its control plane
// reached again) only after another had finished and left, who cannot wait for a site they do
// not see.
TEST_CASE("protocol simulator: a site back from a partition as the job ends catches up before the others leave") {
  int in_time = 0, too_late = 0;
  for (const double start : {3.0, 12.0})
    for (int tenth = 210; tenth < 270; ++tenth)
      for (int site = 0; site < 3; ++site) {
        SimOptions options;
        options.trace = true;
        options.plan = std::vector<Fault>{Fault{Fault::Kind::Partition, start, tenth / 10.0 - start, site, 0}};
        const auto outcome = simulate(1, options);
        const std::string name(1, static_cast<char>('a' + site));
        double first_finished = -1, back = -1;
        for (const auto& line : outcome.trace) {
          const double at = std::stod(line);
          if (first_finished < 0 && line.find(": finished at version") != std::string::npos) first_finished = at;
          if (back < 0 && line.find(" " + name + ": event control_restored") != std::string::npos) back = at;
        }
        const bool late = back < 0 || back > first_finished;
        INFO("partition of ", name, " from ", start, " s to ", tenth / 10.0, " s, back at ", back,
             " s, the first site finished at ", first_finished, " s: ", report(outcome));
        ++(late ? too_late : in_time);
        if (!late) CHECK(outcome.ok());
      }
  CHECK(in_time > 200);
  MESSAGE(in_time, " runs came back in time, ", too_late, " too late");
}

}  // namespace meridian
