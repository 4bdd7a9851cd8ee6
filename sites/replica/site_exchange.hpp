#pragma once
// What the replicas of one site do at the boundaries with the other sites of the job, for both
// outer algorithms: DiLoCo (a delta every H inner steps, applied when its commit arrives) and the
// synchronous baseline (gradients averaged across sites every step), on one path: the same
// leader-side CrossSite, link and control plane.
//
// DiLoCo runs overlapped by default ([outer] overlap): a site that ends a round sends its delta and
// trains on at once; each step the leader looks (without waiting) for the next version, and when
// it is there every replica applies it and rebases the in-flight round onto it. Only the last
// round waits, until every live site's last delta is merged, so all sites end on one version.
//
// Streaming DiLoCo ([outer] algorithm = "streaming", fragments = P) is the same path with rounds
// of one fragment each: an exchange every H / P steps sends that fragment's delta (1/P of the
// model), the versions change the fragments in turn, and a commit rebases only its fragment. The
// last exchange sends every fragment, so all progress is merged and every site ends on one version.
//
// Every member of the site's group calls these together. The group's rank 0 leads: it alone
// talks to other sites, while the others wait in short collectives, so no collective waits long
// enough to time out however long the other sites take. Every member keeps the OuterState and
// runs the same deterministic outer step, so any of them could lead.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "core/config/job_config.hpp"
#include <nlohmann/json.hpp>
#include "sync/comm/communicator.hpp"
#include "sync/round/cross_site.hpp"
#include "sync/round/outer_state.hpp"

namespace meridian {

class Checkpoint;
class Trainer;
class RunLog;
class EtcdClient;
class Link;
class MeasuredLink;
class ShapedLink;
class WanControl;
class WanSchedule;

class SiteExchange {
 public:
  // `initial`: version 0, the weights every site starts from. `clock`: monotonic seconds.
  SiteExchange(const JobConfig& config, std::string site, std::span<const float> initial, RunLog& log,
               std::function<double()> clock);
  ~SiteExchange();

  // False for a one-site job: nothing crosses sites and every call below returns at once.
  bool active() const { return sites_ > 1; }
  bool synchronous() const { return config_.outer.algorithm == JobConfig::Outer::Algorithm::Sync; }
  // Where this site's replicas read in the job's data: disjoint windows for every replica of every site.
  int data_offset() const { return data_offset_; }
  int data_replicas() const { return data_replicas_; }

  // Waits until every site of the job has joined (or, in a job under way, until this site is
  // registered and has caught up with the newest version, from a live peer's state if need be).
  void join(Communicator& group, bool leader, Trainer& trainer);
  // DiLoCo: this site's round length, H or fewer on a slower site ([outer] dynamic_inner_steps);
  // streaming: the steps between its exchanges, that divided by P (at least 1).
  int inner_steps() const { return inner_steps_; }
  // DiLoCo: true when the step just finished ends a round (every inner_steps(), and the last step).
  bool round_ends(std::int64_t steps_done) const;
  // DiLoCo: sends this round's delta. Without overlap, or in the last round, waits for the
  // version(s) that follow; otherwise returns at once.
  void end_round(Communicator& group, bool leader, Trainer& trainer, std::int64_t steps_in_round, bool last);
  // DiLoCo with overlap (or paused), after every step: applies the next version if it is here,
  // without waiting, but for the step [outer] overlap_steps after a round's end: from there the
  // site waits until its rounds are merged.
  void poll(Communicator& group, bool leader, Trainer& trainer);
  // From a signal-handling thread: gives up this site's membership at once (peers need not wait
  // for the lease to lapse). Safe while the replica's own thread is anywhere.
  void leave() const;
  // Leader: told what a wait across sites is waiting for once it has lasted a second, and again
  // every second while it lasts ({"for": CrossSite::describe_wait(), "s": seconds}); an empty
  // object once it ends. For `meridianctl status`: a site that waits says why.
  void on_wait(std::function<void(const nlohmann::json&)> report) { wait_reporter_ = std::move(report); }
  // The operator (sites/replica/site_mode): while paused, rounds end without an exchange (their
  // steps are carried into the next round that is sent: skip_round) and the leader proposes no
  // commit, but the site still applies the versions others commit and rebases onto them.
  void pause_outer(bool paused);
  void skip_round(std::int64_t steps_in_round) {
    carried_steps_ += steps_in_round;
    ++carried_rounds_;
  }
  // Drain, after end_round: waits until every round this site announced is merged (or can no
  // longer be), then gives up its membership in etcd (peers stop counting it at once) and stops
  // renewing it. Returns what to log: the version and the site's last round merged.
  nlohmann::json drain(Communicator& group, bool leader, Trainer& trainer);
  // After a drain: registers again, catches up with the newest version (from a peer's state when
  // far behind) and takes up the job's step, as a site that comes back does.
  void rejoin(Communicator& group, bool leader, Trainer& trainer);
  // Leader, drained: every other site announced its final round and left: the job is over.
  bool job_over();
  // Sync: replaces the site's mean gradients and loss of this step by the mean over all sites.
  void reduce_across_sites(Communicator& group, bool leader, std::int64_t step, std::span<float> grads, double& loss);

  // DiLoCo: the divergence guard's way back for this site (every member together): its in-flight
  // round is dropped onto the newest version it holds (OuterState::drop_in_flight), the rest of
  // the round counts only the steps from here. What the sites share is untouched; a delta it
  // already announced is the peers' screen's to judge. The rollback event's fields.
  nlohmann::json roll_back(Trainer& trainer);

  OuterState& state() { return state_; }
  // A training checkpoint's share of the exchange: the outer state, and the rounds and WAN bytes
  // so far, so that a job's traffic figures count every launch of it. Restore takes the counts
  // only into a process that has counted nothing yet (a resume, not a rollback).
  void save(Checkpoint& checkpoint) const;
  // A checkpoint with what save() gave is on disk: the delta journal may let go of what it holds.
  void checkpointed() {
    if (cross_) cross_->durable(state_.version());
  }
  void restore(const Checkpoint& checkpoint);
  std::int64_t rounds() const { return rounds_; }
  double waited_s() const { return waited_s_; }
  // Time spent applying versions (or adopting a peer's state), joins included.
  double applied_s() const { return applied_s_; }
  // This site's share of the job summary: traffic, rounds, versions (leader only has traffic).
  nlohmann::json summary(std::size_t params) const;
  // The leader's cross-site figures for the site's metrics endpoint: version, staleness, live
  // sites and quorum, traffic per peer, codec ratio, refused deltas, the link's measured figures
  // per peer ("links") and, under an emulated WAN, its faults ("wan_faults"). Empty for a one-site job.
  nlohmann::json ops_figures(std::size_t params) const;

 private:
  void ensure_leader_side();
  // Leader, under an emulated WAN: whether the job's start is known, agreeing on it if not yet.
  bool wan_started();
  void wait_together(Communicator& group, bool leader, const std::function<bool()>& attempt);
  // Applies versions until at most `keep` of this site's rounds are announced and not merged;
  // returns how many are (the same on every member).
  std::int64_t drain_backlog(Communicator& group, bool leader, Trainer& trainer, std::int64_t keep);
  bool eager() const {
    return config_.outer.overlap && config_.outer.overlap_update == JobConfig::Outer::OverlapUpdate::Eager;
  }
  // Eager overlap, right after this site sent `fragment`'s delta (fresh_): the working weights
  // move to the estimate of the commit it is waiting for (OuterState::step_ahead).
  void step_ahead(std::span<float> params, int fragment);
  // A site that was away goes on from the job's step (leader: `job_step`; the others learn it).
  void take_up_job(Communicator& group, bool leader, Trainer& trainer, std::int64_t job_step);
  // Leader: the first step after the newest round any other site announced or merged.
  std::int64_t job_step(const std::map<std::string, std::int64_t>& merged) const;
  // Leader: what `cross_` has for the group; everyone: applies it, or, with no update, drops this
  // site's round that no version can merge (CrossSite::lost_round), once. False when there was nothing.
  bool apply_update(Communicator& group, bool leader, Trainer& trainer, std::optional<CrossSite::Commit> update);
  // Error(Data) once kMaxDroppedRounds were dropped with no version between them.
  void drop_lost_round(Communicator& group, bool leader, Trainer& trainer, std::int64_t round);
  void log_cross_site_events();
  // What the leader's link measured per peer site (round trip, bandwidth each way).
  nlohmann::json measured_links() const;

  JobConfig config_;
  std::string site_;
  RunLog& log_;
  std::function<double()> clock_;
  int sites_ = 1;
  int data_offset_ = 0, data_replicas_ = 1;
  int replicas_ = 1;  // this site's, as configured
  OuterState state_;
  int inner_steps_ = 0;
  std::int64_t rounds_ = 0;      // rounds this site ended, over every launch of the job
  std::uint64_t earlier_sent_ = 0, earlier_received_ = 0;  // WAN bytes of the launches before this one
  std::int64_t next_round_ = 0;  // leader: the number of its next round
  std::int64_t eager_steps_ = 0;  // rounds this process started at an eager estimate
  std::function<void(const nlohmann::json&)> wait_reporter_;
  std::int64_t dropped_round_ = -1;  // the newest of this site's rounds drop_lost_round dropped
  int dropped_in_a_row_ = 0;         // rounds dropped since the last version applied
  std::int64_t rolled_back_at_ = -1;  // the step of the latest rollback: a round counts its steps from there
  double last_version_at_ = 0;     // when this site last took a new version
  double max_version_gap_s_ = 0;   // the longest it went without one: the stall a site death causes
  double waited_s_ = 0;            // time the replicas spent waiting on other sites
  double applied_s_ = 0;
  double started_at_ = 0;
  std::optional<double> rejoined_after_s_;  // from this process's start to its first peer state
  std::shared_ptr<WanSchedule> wan_;  // the emulated WAN's schedule, when the job has one
  std::unique_ptr<EtcdClient> etcd_;
  std::unique_ptr<Link> link_;
  ShapedLink* shaped_ = nullptr;  // inside link_, when it is shaped
  MeasuredLink* measured_ = nullptr;  // link_
  std::unique_ptr<CrossSite> cross_;
  std::unique_ptr<WanControl> wan_control_;  // when wan_
  std::vector<float> scratch_;
  std::vector<float> fresh_;                      // eager: the decoded delta this site just sent
  bool outer_paused_ = false;
  std::int64_t carried_steps_ = 0;  // steps of rounds that ended paused, not sent yet
  int carried_rounds_ = 0;          // and how many rounds they were
  int since_sent_ = -1;             // overlap: steps since this site sent a round; -1 when it waits for none
};

}  // namespace meridian
