#include "sim/des/engine.hpp"

#include <algorithm>
#include <cmath>
#include <deque>

#include "sim/des/commit_timing.hpp"
#include "sim/des/event_queue.hpp"
#include "sim/des/failure_process.hpp"
#include "sim/des/timeline_recorder.hpp"

namespace meridian::sim {

AlgorithmShape shape_of(const Scenario& sc, Algorithm a) {
  AlgorithmShape s;
  s.round_steps = sc.inner_steps;
  s.delta_bytes = sc.delta_bytes;
  switch (a) {
    case Algorithm::Sync:
      s.round_steps = 1;
      s.delta_bytes = sc.grad_bytes;
      s.commit_record = false;
      break;
    case Algorithm::Diloco: break;
    case Algorithm::Overlap: s.backlog = 1; break;
    case Algorithm::Streaming:
      s.backlog = 1;
      s.round_steps = std::max(1, sc.inner_steps / std::max(1, sc.fragments));
      s.delta_bytes = sc.delta_bytes / std::max(1, sc.fragments);
      break;
    case Algorithm::Async:
      s.backlog = 1;
      s.async = true;
      break;
  }
  // Shorter rounds first shape DiLoCo's rounds however they commit, not sync's steps nor streaming's fragments.
  if (a != Algorithm::Sync && a != Algorithm::Streaming && sc.early_steps > 0) {
    s.early_round_steps = sc.early_inner_steps;
    s.early_steps = sc.early_steps;
  }
  return s;
}

namespace {

constexpr double kSafetyHorizonS = 100.0 * 365 * 86400;

enum Kind { kRoundEnd, kCommit, kApply, kFailure, kLeaseExpiry, kRecover, kRejoin, kHorizon };

struct Delta : PendingDelta {
  int incarnation = 0;
  std::int64_t base = 0;
  double compute_s = 0, tokens = 0;
};

// What a site needs of a version when it applies it: how many of its own deltas it settled.
struct Commit {
  std::vector<int> merged_from;  // per site: how many of its deltas this version merged or dropped
};

struct Site {
  enum class State { Round, Waiting, Down, Done } state = State::Waiting;
  bool live = true;  // counted in membership (until its lease lapses)
  int incarnation = 0, lease_epoch = 0;
  std::int64_t version = 0, steps_done = 0, round_steps = 0;
  int unmerged = 0;
  double round_start = 0, round_compute = 0, round_down = 0, round_overhead = 0;
  double carry_compute = 0, carry_down = 0;  // replica failures between rounds, paid by the next
  std::uint64_t token = 0;
};

class Engine : public FailureSink {
 public:
  Engine(const Scenario& sc, Algorithm a)
      : sc_(sc), shape_(shape_of(sc, a)), n_(static_cast<int>(sc.sites.size())), sites_(n_), rec_(n_),
        wan_(sc.wan) {
    result_.algorithm = a;
    result_.sites.resize(n_);
    pending_of_.assign(n_, 0);
    needed_.assign(n_, 0);
    can_.assign(n_, 0);
    holds_.assign(n_, 0);
    for (int s = 0; s < n_; ++s) round_rngs_.push_back(Rng::derive(sc.seed, 0xc0de0000ULL + static_cast<std::uint64_t>(s)));
    for (int s = 0; s < n_; ++s) result_.sites[s].name = sc.sites[s].name;
    rule_.all = true;
    if (shape_.async) {
      rule_.quorum = sc.quorum > 0 ? sc.quorum : n_ / 2 + 1;
      rule_.deadline_s = sc.deadline_s;
    }
  }

  Result run() {
    MERIDIAN_CHECK(n_ > 0, "a scenario without sites");
    const bool limited = sc_.token_budget > 0 || sc_.horizon_s > 0;
    for (int s = 0; s < n_; ++s) {
      rec_.emit(s, 0, sc_.startup_s, Phase::Overhead);
      start_round(s, sc_.startup_s);
    }
    failures_ = std::make_unique<FailureProcess>(sc_, q_, kFailure);
    // A budget that is never reached (every delta too stale, say) still ends, reported as not reached.
    const double horizon = sc_.horizon_s > 0 ? sc_.horizon_s : kSafetyHorizonS;
    if (limited) q_.schedule({.t = horizon, .kind = kHorizon});
    while (!q_.empty() && !stopped_ && (limited || done_ < n_)) handle(q_.pop());
    const double end = stopped_ ? q_.now() : 0;
    for (int s = 0; s < n_; ++s)
      if (stopped_ || sites_[s].state != Site::State::Done) close(s, std::max(end, q_.now()));
    return finish();
  }

 private:
  void handle(const Event& e) {
    ++result_.events;
    Site& site = e.site >= 0 ? sites_[e.site] : sites_[0];
    switch (e.kind) {
      case kRoundEnd:
        if (e.token == site.token && site.state == Site::State::Round) end_round(e.site, e.t);
        break;
      case kCommit:
        if (e.token == commit_token_) commit(e.t);
        break;
      case kApply: apply(e.site, e.arg, e.token, e.t); break;
      case kFailure: failures_->strike(e, *this); break;
      case kLeaseExpiry:
        if (e.token == static_cast<std::uint64_t>(site.lease_epoch) && site.state == Site::State::Down) {
          site.live = false;
          replan(e.t);
        }
        break;
      case kRecover:
        if (e.arg == site.incarnation) recover(e.site, e.t);
        break;
      case kRejoin:
        if (e.arg == site.incarnation) rejoin(e.site, e.t);
        break;
      case kHorizon: stopped_ = true; break;
    }
  }

  std::int64_t steps_left(const Site& s) const {
    return sc_.token_budget > 0 || sc_.horizon_s > 0 ? shape_.round_steps : sc_.steps - s.steps_done;
  }

  void start_round(int s, double t) {
    Site& site = sites_[s];
    const SiteModel& m = sc_.sites[s];
    site.state = Site::State::Round;
    const int length = site.steps_done < shape_.early_steps ? shape_.early_round_steps : shape_.round_steps;
    site.round_steps = std::min<std::int64_t>(length, steps_left(site));
    site.round_start = t;
    double spread = 1;
    if (sc_.round_time_cv > 0) spread = std::max(0.05, 1 + sc_.round_time_cv * round_rngs_[s].normal());
    site.round_compute = static_cast<double>(site.round_steps) * m.step_s * spread + site.carry_compute;
    site.round_down = site.carry_down;
    site.carry_compute = site.carry_down = 0;
    // Evaluations fall on multiples of eval_every inside the round, the final one excepted (done at the end).
    site.round_overhead = static_cast<double>(site.round_steps) * m.step_overhead_s;
    if (sc_.eval_every > 0) {
      const std::int64_t last = site.steps_done + site.round_steps - (site.steps_done + site.round_steps == sc_.steps);
      site.round_overhead += sc_.eval_s * static_cast<double>(last / sc_.eval_every - site.steps_done / sc_.eval_every);
    }
    schedule_round_end(s);
  }

  void schedule_round_end(int s) {
    Site& site = sites_[s];
    q_.schedule({.t = site.round_start + site.round_compute + site.round_down + site.round_overhead,
                 .kind = kRoundEnd, .site = s, .token = ++site.token});
  }

  // The round's time as segments: compute, then failure stalls, then evaluations, cut at `until`.
  void emit_round(int s, double until) {
    const Site& site = sites_[s];
    double t = site.round_start;
    for (const auto& [len, phase] : {std::pair{site.round_compute, Phase::Compute}, {site.round_down, Phase::Down},
                                     {site.round_overhead, Phase::Overhead}}) {
      const double end = std::min(until, t + len);
      rec_.emit(s, t, end, phase);
      t = end;
    }
    rec_.emit(s, t, until, Phase::Down);
  }

  void end_round(int s, double t) {
    Site& site = sites_[s];
    const SiteModel& m = sc_.sites[s];
    emit_round(s, t);
    site.steps_done += site.round_steps;
    result_.sites[s].steps = site.steps_done;
    ++result_.sites[s].rounds;
    Delta d;
    d.site = s;
    d.incarnation = site.incarnation;
    d.base = site.version;
    d.compute_s = site.round_compute;
    d.tokens = static_cast<double>(site.round_steps) * m.tokens_per_step;
    d.arrive.resize(n_);
    for (int p = 0; p < n_; ++p) {
      if (p != s && sites_[p].state != Site::State::Down) result_.wan_bytes += shape_.delta_bytes;
      const double flows = sc_.split_exchange ? transfer_parallelism(m.gpus, sc_.sites[p].gpus) : 1;
      d.arrive[p] = t + wan_.transfer_s(s, p, shape_.delta_bytes, t, flows);
    }
    pending_.push_back(std::move(d));
    ++site.unmerged;
    site.state = Site::State::Waiting;
    if (finished(site)) {
      if (site.unmerged == 0) mark_done(s, t);
    } else if (site.unmerged <= shape_.backlog) {
      start_round(s, t);
    }
    replan(t);
  }

  bool finished(const Site& site) const {
    return sc_.token_budget <= 0 && sc_.horizon_s <= 0 && site.steps_done >= sc_.steps;
  }

  void mark_done(int s, double t) {
    sites_[s].state = Site::State::Done;
    rec_.emit(s, t, t + sc_.eval_s, Phase::Overhead);  // the final evaluation
    result_.sites[s].end_s = t + sc_.eval_s;
    ++done_;
  }

  // Recomputes when the next version is due; a superseded plan's event is ignored by its token.
  void replan(double now) {
    ++commit_token_;
    std::fill(pending_of_.begin(), pending_of_.end(), 0);
    for (const auto& d : pending_) ++pending_of_[d.site];
    bool all_in = true;
    for (int s = 0; s < n_; ++s) {
      const Site& site = sites_[s];
      needed_[s] = site.live && !(finished(site) && site.unmerged == 0);
      can_[s] = site.state != Site::State::Down;
      all_in = all_in && (!needed_[s] || pending_of_[s] > 0);
    }
    // Without a quorum or deadline a version waits for every needed site: skip the full plan
    // while one has sent nothing (most rounds' ends).
    if (!shape_.async && !all_in) return;
    CommitRule rule = rule_;
    if (shape_.async && sc_.deadline_s <= 0) rule.deadline_s = adaptive_deadline_;
    plan_ = plan_commit(pending_, needed_, can_, rule);
    if (plan_.t < kNever) q_.schedule({.t = std::max(now, plan_.t), .kind = kCommit, .token = commit_token_});
  }

  // Compacts pending_ in place: d stays, as its `at`-th entry (never a self-move, which empties a vector).
  void keep(Delta& d, std::size_t at) {
    if (&pending_[at] != &d) pending_[at] = std::move(d);
  }

  double adaptive_deadline() const {
    double fastest = kNever;
    for (const auto& m : sc_.sites) fastest = std::min(fastest, m.step_s);
    const double half_round = 0.5 * shape_.round_steps * fastest;
    if (lags_.size() < 3) return kNever;  // too few arrivals to judge; wait for every site
    std::vector<double> v(lags_.begin(), lags_.end());
    std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
    const double median = v[v.size() / 2];
    for (auto& x : v) x = std::abs(x - median);
    std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
    return std::max(half_round, median + sc_.deadline_k * v[v.size() / 2]);
  }

  void commit(double t) {
    const int p = plan_.proposer;
    Commit c;
    c.merged_from.assign(n_, 0);
    double first = kNever;
    for (const auto& d : pending_) first = std::min(first, d.arrive[p]);
    std::vector<double>& holds = holds_;
    std::fill(holds.begin(), holds.end(), t);
    std::size_t kept = 0;
    for (auto& d : pending_) {
      if (d.arrive[p] > t) {
        keep(d, kept++);
        continue;
      }
      const std::int64_t staleness = result_.versions - d.base;
      if (sites_[d.site].incarnation == d.incarnation) ++c.merged_from[d.site];
      if (staleness > sc_.max_staleness) {
        ++result_.deltas_dropped;
        continue;
      }
      ++result_.deltas_merged;
      staleness_sum_ += static_cast<double>(staleness);
      result_.tokens += d.tokens;
      result_.sites[d.site].useful_s += d.compute_s;
      if (shape_.async) {
        lags_.push_back(d.arrive[p] - first);
        if (lags_.size() > 32) lags_.pop_front();
      }
      for (int b = 0; b < n_; ++b) holds[b] = std::max(holds[b], d.arrive[b]);
    }
    pending_.resize(kept);
    if (shape_.async) adaptive_deadline_ = adaptive_deadline();
    ++result_.versions;
    for (int b = 0; b < n_; ++b) {
      const double record = shape_.commit_record ? t + sc_.wan.link(p, b).latency_ms / 1000 * (p != b) : t;
      q_.schedule({.t = std::max(record, holds[b]), .kind = kApply, .site = b, .arg = result_.versions,
                   .token = static_cast<std::uint64_t>(sites_[b].incarnation)});
    }
    commits_.push_back(std::move(c));
    if (sc_.token_budget > 0 && result_.tokens >= sc_.token_budget) {
      result_.budget_reached = true;
      stopped_ = true;
      return;
    }
    replan(t);
  }

  void apply(int s, std::int64_t version, std::uint64_t incarnation, double t) {
    Site& site = sites_[s];
    if (incarnation != static_cast<std::uint64_t>(site.incarnation) || site.state == Site::State::Down) return;
    site.version = std::max(site.version, version);
    site.unmerged -= commits_[static_cast<std::size_t>(version - 1)].merged_from[s];
    if (site.state != Site::State::Waiting) return;
    if (finished(site)) {
      if (site.unmerged == 0) {
        rec_.emit(s, rec_.end(s), t, Phase::Wait);
        mark_done(s, t);
        replan(t);
      }
    } else if (site.unmerged <= shape_.backlog) {
      rec_.emit(s, rec_.end(s), t, Phase::Wait);
      start_round(s, t);
    }
  }

 public:
  // A replica of site s fails: the site regroups without it (keep_batch: the survivors run its
  // micro-batches, 1/g slower) until it is back and healed, then regroups again. A one-GPU site stalls.
  void replica_failure(int s, double recovery_s) override {
    Site& site = sites_[s];
    if (site.state == Site::State::Down || site.state == Site::State::Done) return;
    ++result_.sites[s].replica_failures;
    const int g = sc_.sites[s].gpus;
    const double compute = g > 1 ? recovery_s / g : 0;
    const double down = g > 1 ? 2 * sc_.regroup_s : recovery_s + sc_.regroup_s;
    if (site.state == Site::State::Round) {
      site.round_compute += compute;
      site.round_down += down;
      schedule_round_end(s);
    } else {
      site.carry_compute += compute;
      site.carry_down += down;
    }
  }

  // Site s goes away: its round is lost, deltas it had not finished sending are dropped, peers
  // count it until its lease lapses; after recovery_s it fetches a live peer's state and rejoins.
  void site_failure(int s, double recovery_s, double t) override {
    Site& site = sites_[s];
    if (site.state == Site::State::Down || site.state == Site::State::Done) return;
    ++result_.sites[s].site_failures;
    if (site.state == Site::State::Round) emit_round(s, t);
    else rec_.emit(s, rec_.end(s), t, Phase::Wait);
    site.state = Site::State::Down;
    ++site.incarnation;
    ++site.token;
    std::size_t kept = 0;
    for (auto& d : pending_) {
      const double sent = *std::max_element(d.arrive.begin(), d.arrive.end());
      if (d.site == s && sent > t) ++result_.deltas_dropped;
      else keep(d, kept++);
    }
    pending_.resize(kept);
    q_.schedule({.t = t + sc_.lease_ttl_s, .kind = kLeaseExpiry, .site = s,
                 .token = static_cast<std::uint64_t>(site.lease_epoch)});
    q_.schedule({.t = t + recovery_s, .kind = kRecover, .site = s, .arg = site.incarnation});
    replan(t);
  }

 private:
  void recover(int s, double t) {
    int peer = -1;
    for (int p = 0; p < n_; ++p)
      if (p != s && sites_[p].state != Site::State::Down &&
          (peer < 0 || sc_.wan.nominal_s(p, s, sc_.state_bytes) < sc_.wan.nominal_s(peer, s, sc_.state_bytes)))
        peer = p;
    double fetch = 0;
    if (peer >= 0) {
      fetch = wan_.transfer_s(peer, s, sc_.state_bytes, t);
      result_.wan_bytes += sc_.state_bytes;
    }
    q_.schedule({.t = t + fetch, .kind = kRejoin, .site = s, .arg = sites_[s].incarnation});
  }

  void rejoin(int s, double t) {
    Site& site = sites_[s];
    rec_.emit(s, rec_.end(s), t, Phase::Down);
    site.live = true;
    ++site.lease_epoch;
    site.version = result_.versions;
    site.unmerged = 0;
    if (finished(site)) {
      mark_done(s, t);
    } else {
      start_round(s, t);
    }
    replan(t);
  }

  // Where a site stood when the simulation stopped.
  void close(int s, double t) {
    Site& site = sites_[s];
    if (site.state == Site::State::Round) emit_round(s, t);
    else rec_.emit(s, rec_.end(s), t, site.state == Site::State::Down ? Phase::Down : Phase::Wait);
    result_.sites[s].end_s = t;
  }

  Result finish() {
    result_.wall_s = 0;
    double util = 0, useful = 0, time = 0;
    for (int s = 0; s < n_; ++s) {
      SiteResult& r = result_.sites[s];
      rec_.take(s, r);
      result_.wall_s = std::max(result_.wall_s, r.end_s);
      util += r.utilization();
      useful += r.useful_s;
      time += r.end_s;
    }
    result_.compute_utilization = util / n_;
    result_.goodput = time > 0 ? useful / time : 0;
    result_.mean_staleness = result_.deltas_merged > 0 ? staleness_sum_ / static_cast<double>(result_.deltas_merged) : 0;
    return std::move(result_);
  }

  const Scenario& sc_;
  AlgorithmShape shape_;
  int n_;
  std::vector<Site> sites_;
  TimelineRecorder rec_;
  WanModel wan_;  // this run's copy: it queues the run's transfers
  std::vector<Rng> round_rngs_;  // per site: its rounds' spread, independent of everything else
  EventQueue q_;
  std::unique_ptr<FailureProcess> failures_;
  CommitRule rule_;
  CommitPlan plan_;
  std::uint64_t commit_token_ = 0;
  std::vector<Delta> pending_;
  std::vector<int> pending_of_;         // per site: how many of pending_ are its
  std::vector<char> needed_, can_;      // per site: must contribute; can propose
  std::vector<double> holds_;           // per site: when it holds every delta of a commit
  std::vector<Commit> commits_;
  std::deque<double> lags_;
  double adaptive_deadline_ = kNever;  // recomputed when lags_ changes
  double staleness_sum_ = 0;
  int done_ = 0;
  bool stopped_ = false;
  Result result_;
};

}  // namespace

Result simulate(const Scenario& scenario, Algorithm algorithm) { return Engine(scenario, algorithm).run(); }

}  // namespace meridian::sim
