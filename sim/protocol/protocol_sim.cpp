#include "sim/protocol/protocol_sim.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <numeric>

#include "core/util/error.hpp"
#include "sim/protocol/fault_plan.hpp"
#include "sim/protocol/mutants.hpp"

namespace meridian {
namespace {

using namespace std::chrono_literals;

SimJob job_for(std::uint64_t seed, const SimOptions& options, Rng& rng) {
  SimJob job;
  for (int i = 0; i < options.sites; ++i) job.sites.push_back(std::string(1, static_cast<char>('a' + i)));
  job.rounds = options.rounds;
  job.seed = seed;
  job.overlap = rng.uniform() < 0.75;
  // Streaming DiLoCo for two seeds in three (P = 2 or 4), eager overlapped rounds for a quarter.
  const int drawn = std::array{1, 2, 4}[rng.below(3)];
  job.fragments = options.fragments > 0 ? options.fragments : drawn;
  job.early_rounds = options.early_rounds;
  if (job.early_rounds > 0) job.fragments = 1;
  job.eager = rng.uniform() < 0.25;
  // From a stream of its own: the seeds' other draws, and so their faults, stay what they were.
  job.split = options.split.value_or(Rng::derive(seed, 7).uniform() < 0.5);
  if (options.shard_outer) {
    job.shard_outer = job.split = true;
    job.fragments = 1;
    job.eager = false;
    job.params = kSimShardedParams;
    // Sites of 2 and 3 replicas side by side, each cutting its own way: a stream of its own.
    Rng replicas = Rng::derive(seed, 11);
    for (std::size_t i = 0; i < job.sites.size(); ++i)
      job.replicas.push_back(options.replicas > 0 ? options.replicas : 2 + static_cast<int>(replicas.below(2)));
  }
  job.mutations = options.mutations;
  CrossSiteOptions& c = job.cross;
  c.lease_ttl_s = options.lease_ttl_s;
  c.end_unreachable_s = options.end_unreachable_s;
  c.control_poll = 50ms;
  c.rerequest_after = 300ms;
  c.control_retry = 250ms;
  c.catch_up_after = 2000ms;
  return job;
}

CommitRuleOptions rule_of(const SimJob& job) {
  CommitRuleOptions rule = job.cross.rule;
  rule.fragments = job.fragments;
  return rule;
}

// The faults' starts and ends as actions on the clock, in order.
struct Action {
  double at = 0;
  std::function<void()> run;
};

class Run {
 public:
  Run(std::uint64_t seed, const SimOptions& options)
      : options_(options),
        rng_(Rng::derive(seed, 0)),
        job_(job_for(seed, options, rng_)),
        store_(clock_),
        network_(clock_, Rng::derive(seed, 1).next_u64()),
        checker_(sim_initial_weights(job_.params), job_.outer, CodecOptions{CodecKind::Fp32}, rule_of(job_),
                 sim_fragments(job_.params, job_.fragments), job_.cross.screen),
        world_{job_, faults_, clock_, store_, network_, checker_, {}} {
    outcome_.seed = seed;
    outcome_.overlap = job_.overlap;
    outcome_.fragments = job_.fragments;
    outcome_.split = job_.split;
    outcome_.shard_outer = job_.shard_outer;
    outcome_.replicas = job_.replicas;
    if (options.trace) {
      world_.trace = [this](const std::string& line) { outcome_.trace.push_back(line); };
      checker_.on_fail([this](const std::string& what) {
        char at[32];
        std::snprintf(at, sizeof at, "%.3f", clock_.now());
        outcome_.trace.push_back(std::string(at) + " violated: " + what);
      });
    }
    for (const auto& name : job_.sites) sites_.push_back(std::make_unique<SimSite>(world_, name));
  }

  SimOutcome go();
  // The run as far as it came when a broken invariant stopped it.
  SimOutcome broken(const InvariantError& e) {
    checker_.fail(std::string("a broken invariant stopped the run: ") + e.what());
    outcome_.violations = checker_.violations();
    return outcome_;
  }

 private:
  double plan();  // when the fault window ends
  void note_commits();
  void schedule(double at, std::function<void()> run) { actions_.push_back({at, std::move(run)}); }
  void start(const Fault& f);
  bool may_lose_disk(const SimSite& site);
  void rewrite_commit();  // Fault::Kind::RewriteCommit
  bool all_done() const {
    return std::all_of(sites_.begin(), sites_.end(), [](const auto& s) { return s->done(); });
  }
  // The last key of the unbroken run of commit records from version 1 (a junk record counts).
  std::int64_t newest_commit() {
    const RoundKeys keys(job_.name);
    std::int64_t v = 0;
    while (store_.get(keys.commit(v + 1))) ++v;
    return v;
  }
  void trace(const std::string& line) {
    if (world_.trace) world_.trace(line);
  }

  SimOptions options_;
  Rng rng_;
  SimJob job_;
  ManualClock clock_;
  ControlFaultState faults_;
  MemoryStore store_;
  SimNetwork network_;
  Checker checker_;
  SimWorld world_;
  std::vector<std::unique_ptr<SimSite>> sites_;
  std::vector<Action> actions_;
  std::map<std::string, std::string> rewritten_;  // key -> the record first written there
  int message_faults_ = 0;
  SimOutcome outcome_;
};

void Run::rewrite_commit() {
  // The newest version every live site holds: each of them read and applied its record.
  std::int64_t version = -1;
  for (const auto& s : sites_)
    if (!s->down()) version = version < 0 ? s->version() : std::min(version, s->version());
  if (version < 1) return;
  const std::string key = RoundKeys(job_.name).commit(version);
  const auto bytes = store_.get(key);
  if (!bytes || rewritten_.contains(key)) return;
  CommitRecord record;
  try {
    record = decode_commit(*bytes);
  } catch (const Error&) {
    return;  // junk is no record to write over
  }
  rewritten_[key] = *bytes;
  ++outcome_.rewritten;
  record.proposer = "mallory";
  store_.put(key, encode(record), 0);
  trace("version " + std::to_string(version) + "'s record written over");
}

bool Run::may_lose_disk(const SimSite& site) {
  // Judged when the disk goes, at the restart (the site may have run and committed alone since
  // it crashed, if another crash's restart came between): every other site is up and holds the
  // newest version, in memory and on its disk; otherwise a version only this site held (or a delta
  // only its journal kept) would be gone for good, which no protocol can help. (A version a site
  // adopted as a whole state is on its disk only from its next checkpoint: no journal replays it.)
  const std::int64_t newest = newest_commit();
  const bool others_hold = std::all_of(sites_.begin(), sites_.end(), [&](const auto& s) {
    return s.get() == &site || (!s->stopped() && s->version() == newest && s->disk_version() == newest);
  });
  // And no write of its is still on its way to the control plane (late_write): one that lands
  // after the restart would speak for bytes nobody has.
  return others_hold && store_.late_writes() == 0;
}

void Run::start(const Fault& f) {
  SimSite& site = *sites_[static_cast<std::size_t>(f.site)];
  const std::string& name = job_.sites[static_cast<std::size_t>(f.site)];
  const double end = f.at + f.duration;
  switch (f.kind) {
    case Fault::Kind::Crash: {
      site.crash();
      schedule(end, [this, &site, lose = f.amount > 0] { site.restart(lose && may_lose_disk(site)); });
      return;
    }
    case Fault::Kind::Stop:
      site.stop(true);
      schedule(end, [&site] { site.stop(false); });
      return;
    case Fault::Kind::Partition:
      site.cut_off(true);
      schedule(end, [&site] { site.cut_off(false); });
      return;
    case Fault::Kind::Outage: {
      const auto refresh = [this] { for (auto& s : sites_) s->apply_faults(); };
      ++faults_.outages;
      refresh();
      schedule(end, [this, refresh] { --faults_.outages; refresh(); });
      return;
    }
    case Fault::Kind::LostReplies:
    case Fault::Kind::LateWrites:
    case Fault::Kind::SlowReplies: {
      auto& map = f.kind == Fault::Kind::LostReplies  ? faults_.lost_reply
                  : f.kind == Fault::Kind::LateWrites ? faults_.late_write
                                                      : faults_.slow_reply_s;
      map[name] = f.amount;
      site.apply_faults();
      schedule(end, [&map, &site, name] { map.erase(name); site.apply_faults(); });
      return;
    }
    case Fault::Kind::MessageFaults: {
      auto& o = network_.options();
      ++message_faults_;
      o.loss = o.duplicate = o.corrupt = f.amount;
      schedule(end, [this] {
        if (--message_faults_ == 0) network_.options().loss = network_.options().duplicate = network_.options().corrupt = 0;
      });
      return;
    }
    case Fault::Kind::DeleteMember:
      store_.erase(RoundKeys(job_.name).member(name));
      return;
    case Fault::Kind::JunkCommit: {
      // Where the next version's record goes, before anyone commits it.
      store_.create_if_absent(RoundKeys(job_.name).commit(newest_commit() + 1), "\x01junk");
      return;
    }
    case Fault::Kind::Drain:
      site.drain();
      schedule(end, [&site] { site.resume(); });
      return;
    case Fault::Kind::PauseOuter:
      site.pause_outer(true);
      schedule(end, [&site] { site.pause_outer(false); });
      return;
    case Fault::Kind::Rollback:
      site.rollback();
      return;
    case Fault::Kind::Spike:
      for (auto& s : sites_) s->spike();
      return;
    case Fault::Kind::OuterFlip:
      site.flip_outer(f.amount);
      return;
    case Fault::Kind::RewriteCommit:
      return rewrite_commit();
    case Fault::Kind::ReplicaDeath: {
      const int replica = f.replica == Fault::kLeader ? site.leader_replica() : f.replica;
      if (replica < 0) return;  // the site is down
      site.kill_replica(replica);
      schedule(end, [&site, replica, lose = f.amount > 0] { site.restart_replica(replica, lose); });
      return;
    }
  }
}

double Run::plan() {
  const double window = 0.6 * static_cast<double>(job_.rounds) * job_.round_s;
  auto faults = options_.plan ? *options_.plan : plan_faults(rng_, options_.sites, options_.faults, window);
  // The others each from a stream of their own: the seed's other faults stay what they were.
  std::vector<Fault> drawn;
  if (job_.shard_outer && !options_.plan) {
    Rng deaths = Rng::derive(job_.seed, 13), leader_deaths = Rng::derive(job_.seed, 14);
    drawn = plan_replica_deaths(deaths, job_.replicas, options_.replica_deaths, window);
    const auto leaders = plan_replica_deaths(leader_deaths, job_.replicas, options_.leader_deaths, window, true);
    drawn.insert(drawn.end(), leaders.begin(), leaders.end());
  }
  if (!options_.plan && options_.outer_flips > 0) {
    Rng flips = Rng::derive(job_.seed, 15);
    const auto flipped = plan_outer_flips(flips, options_.sites, options_.outer_flips, window);
    drawn.insert(drawn.end(), flipped.begin(), flipped.end());
  }
  if (!options_.plan && options_.rewrites > 0) {
    Rng rewrites = Rng::derive(job_.seed, 16);
    const auto written = plan_rewrites(rewrites, options_.rewrites, window);
    drawn.insert(drawn.end(), written.begin(), written.end());
  }
  for (const Fault& f : drawn)
    faults.insert(
        std::upper_bound(faults.begin(), faults.end(), f, [](const Fault& a, const Fault& b) { return a.at < b.at; }),
        f);
  outcome_.faults = static_cast<int>(faults.size());
  // A drawn schedule's faults end by the window's end; a stated one's by its last fault's.
  double last = options_.plan || faults.empty() ? 0 : window;
  for (const Fault& f : faults) last = std::max(last, f.at + f.duration);
  for (const Fault& f : faults)
    schedule(f.at, [this, f] {
      trace(describe(f, job_.sites));
      start(f);
    });
  return last;
}

void Run::note_commits() {
  for (auto it = checker_.records().upper_bound(static_cast<std::int64_t>(outcome_.history.size()));
       it != checker_.records().end() && it->first == static_cast<std::int64_t>(outcome_.history.size()) + 1; ++it)
    outcome_.history.push_back({it->second, clock_.now()});
}

SimOutcome Run::go() {
  const double last_fault = plan();
  outcome_.liveness_bound_s = static_cast<double>(job_.rounds + 10) * job_.round_s + 30;
  const double give_up = last_fault + outcome_.liveness_bound_s;
  double next_renewal = 0;
  std::vector<std::size_t> order(sites_.size());
  std::iota(order.begin(), order.end(), 0);
  while (!all_done() && clock_.now() < give_up) {
    // Actions scheduled while running (a fault's end) join the queue: take the earliest due each time.
    while (true) {
      auto due = std::min_element(actions_.begin(), actions_.end(), [](const Action& a, const Action& b) { return a.at < b.at; });
      if (due == actions_.end() || due->at > clock_.now()) break;
      auto run = std::move(due->run);
      actions_.erase(due);
      run();
    }
    if (clock_.now() >= next_renewal) {
      for (auto& s : sites_) s->renew_lease();
      next_renewal = clock_.now() + 0.5;
    }
    // A different interleaving every tick, from the seed.
    for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng_.below(i)]);
    for (const std::size_t i : order) sites_[i]->tick();
    note_commits();
    clock_.advance(options_.tick_s);
  }
  outcome_.virtual_s = clock_.now();
  if (!all_done()) {
    std::string what = "liveness: not every site finished within " + std::to_string(outcome_.liveness_bound_s) +
                       " s of virtual time after the last fault:";
    for (const auto& s : sites_) what += " [" + s->describe() + "]";
    const RoundKeys keys(job_.name);
    for (const auto& [key, value] : store_.dump()) {
      if (!key.starts_with(keys.commits())) continue;
      try {
        const auto r = decode_commit(value);
        if (r.number <= checker_.newest_version()) continue;
        what += "; version " + std::to_string(r.number) + " by " + r.proposer + ":";
        for (const auto& e : r.entries) what += " " + e.site + std::to_string(e.round);
      } catch (const Error&) {
        what += "; " + key + " unreadable";
      }
    }
    checker_.fail(what);
  }
  // The sites are judged against the log as it was written: a record written over is the fault.
  auto log = store_.dump();
  for (auto& [key, value] : log)
    if (const auto it = rewritten_.find(key); it != rewritten_.end()) value = it->second;
  checker_.check_log(RoundKeys(job_.name), log);
  outcome_.violations = checker_.violations();
  outcome_.versions = checker_.newest_version();
  outcome_.rounds_dropped = checker_.rounds_dropped();
  outcome_.overflowed = network_.counters().overflowed;
  for (const auto& s : sites_) {
    outcome_.assembled += s->assembled();
    outcome_.held_in_parts += s->held_in_parts();
    outcome_.regroups += s->regroups();
    outcome_.refetches += s->refetches();
    outcome_.replica_deaths += s->replica_deaths();
    outcome_.leader_deaths += s->leader_deaths();
    outcome_.mirror_cuts += s->mirror_cuts();
    outcome_.states_adopted += s->states_adopted();
    outcome_.diverged += s->diverged();
    outcome_.rebuilt += s->rebuilt();
    outcome_.contradicted += s->contradicted();
  }
  return outcome_;
}

}  // namespace

SimOutcome simulate(std::uint64_t seed, const SimOptions& options) {
  // For this run only: a sweep's runs follow one another, so no other run sees the switch.
  const SimMutations& m = options.mutations;
  std::vector<std::unique_ptr<MutantOn>> on;
  for (const auto& [wanted, which] :
       {std::pair{m.unverified_deltas, Mutant::UnverifiedDeltas}, std::pair{m.skip_rebase, Mutant::SkipRebase},
        std::pair{m.rebase_wrong_fragment, Mutant::RebaseWrongFragment},
        std::pair{m.keep_dropped_round, Mutant::KeepDroppedRound},
        std::pair{m.unbounded_backlog, Mutant::UnboundedBacklog}, std::pair{m.keep_last_part, Mutant::KeepLastPart},
        std::pair{m.ignore_vouches, Mutant::IgnoreVouches}})
    if (wanted) on.push_back(std::make_unique<MutantOn>(which));
  Run run(seed, options);
  try {
    return run.go();
  } catch (const InvariantError& e) {
    // A bug in the code under test (a real process would die of it): reported like any
    // violation, with the trace up to it, and the sweep goes on to the next seed.
    return run.broken(e);
  }
}

}  // namespace meridian
