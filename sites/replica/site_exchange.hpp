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
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>

#include "core/checkpoint/checkpoint.hpp"
#include "core/checkpoint/checkpoint_parts.hpp"
#include "core/config/job_config.hpp"
#include "core/model/shard_map.hpp"
#include "crosssite/outer/outer_state.hpp"
#include "crosssite/round/cross_site.hpp"
#include "crosssite/round/round_driver.hpp"
#include "intrasite/comm/communicator.hpp"
#include "sites/replica/kept_parts.hpp"

namespace meridian {

class Checkpoint;
class Trainer;
class RunLog;
class EtcdClient;
class Link;
class MeasuredLink;
class ShapedLink;
class SiteLanes;
class StripedLink;
class WanControl;
class WanSchedule;

// Seconds on a monotonic clock (waits, figures) and on the wall clock (an emulated WAN's
// schedule, which every site reads alike, and the link's measurements).
struct ExchangeClocks {
  std::function<double()> monotonic;
  std::function<double()> wall;
};

// The wiring of a site's cross-site exchange and its figures: the etcd client, the link stack
// (transport, WAN emulation, measurement), CrossSite on the leader, the loop that pumps the
// RoundDriver (crosssite/round/round_driver.hpp), which holds the round itself, and the log.
class SiteExchange final : private RoundEvents {
 public:
  // `trainer`'s initial weights are version 0, the weights every site starts from. `replica`: this
  // replica's number in its site (with [parallel] shard_outer it holds only the part of the outer
  // state that number keeps in a whole group until its group first cuts it). `clock`: monotonic seconds.
  SiteExchange(const JobConfig& config, std::string site, int replica, Trainer& trainer, RunLog& log,
               ExchangeClocks clocks);
  ~SiteExchange() override;

  // False for a one-site job: nothing crosses sites and every call below returns at once.
  bool active() const { return placement_.sites > 1; }
  bool synchronous() const { return config_.outer.algorithm == JobConfig::Outer::Algorithm::Sync; }
  // Where this site's replicas read in the job's data: disjoint windows for every replica of every site.
  int data_offset() const { return placement_.data_offset; }
  int data_replicas() const { return placement_.data_replicas; }

  // Waits until every site of the job has joined (or, in a job under way, until this site is
  // registered and has caught up with the newest version, from a live peer's state if need be).
  void join(Communicator& group, bool leader, Trainer& trainer);
  // DiLoCo: true when the step just finished ends a round (every H / P steps, or fewer on a slower
  // site with [outer] dynamic_inner_steps, and the last step).
  bool round_ends(std::int64_t steps_done) const;
  // DiLoCo, after step `done`: ends the round when one ends (`hold`: paused, its steps carried
  // into the next round sent), otherwise looks for the next version (overlap, or paused), and
  // waits as long as the round says: without overlap, or in the last round, for the version(s)
  // that follow; with overlap, while more than one round is unmerged or the overlap's steps ran out.
  void after_step(Communicator& group, bool leader, Trainer& trainer, std::int64_t done, bool last, bool hold);
  // From a signal-handling thread: gives up this site's membership at once (peers need not wait
  // for the lease to lapse). Safe while the replica's own thread is anywhere.
  void leave() const;
  // Leader: told what a wait across sites is waiting for once it has lasted a second, and again
  // every second while it lasts ({"for": CrossSite::describe_wait(), "s": seconds}); an empty
  // object once it ends. For `meridianctl status`: a site that waits says why.
  void on_wait(std::function<void(const nlohmann::json&)> report) { waits_.reporter = std::move(report); }
  // The operator (sites/replica/site_mode): while paused, rounds end without an exchange and the
  // leader proposes no commit, but the site still applies the versions others commit.
  void pause_outer(bool paused);
  // Drain, after the round's end: waits until every round this site announced is merged (or can
  // no longer be), then gives up its membership in etcd (peers stop counting it at once) and stops
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
  // the round counts only the steps from here. The rollback event's fields.
  nlohmann::json roll_back(Trainer& trainer, Communicator& group);

  OuterState& state() { return state_; }
  // A split exchange: this replica's lane (its figures; an empty object on the leader or without).
  nlohmann::json lane_figures() const;
  // The bytes of versions, means, deltas and states this replica received from its leader in the
  // group's channel (the leader's: none).
  std::uint64_t group_bytes_received() const { return group_received_; }
  // The outer state's buffers, the synchronous baseline's scratch and a lane's deltas, in bytes.
  std::size_t held_bytes() const;
  // A training checkpoint's share of the exchange: the outer state, and the rounds and WAN bytes
  // so far, so that a job's traffic figures count every launch of it. Restore takes the counts
  // only into a process that has counted nothing yet (a resume, not a rollback).
  void save(Checkpoint& checkpoint) const;
  // A hash of what save() writes into a heal's snapshot (Trainer::Extras::fingerprint).
  std::uint64_t fingerprint() const;
  // A checkpoint with what save() gave is on disk: the delta journal may let go of what it holds.
  void checkpointed() {
    if (cross_) cross_->durable(state_.version());
  }
  void restore(const Checkpoint& checkpoint);
  // Why this replica must not write a checkpoint now (Trainer::Extras::unsound): it leads, and its
  // copy of the outer state is not its version. Empty otherwise.
  std::string unsound_for_checkpoint();
  // After a resume that left a checkpoint's parts on disk (Trainer::resume_from): a sharded outer
  // state takes its part and its mirror's under the cut of `replicas` from the parts' slices, so
  // the group's cut then moves nothing. Nothing to do for a whole state (its records were in the
  // checkpoint's own file) or parts without slices. The elements it read (0: none).
  std::size_t restore_from_parts(const CheckpointParts& parts, int rank, int replicas);
  // Every member, before a whole checkpoint is written: a sharded outer state's parts go to the
  // leader, whose save() writes the whole model's records (a checkpoint loads at any replica count).
  void gather_for_checkpoint(Communicator& group, bool leader);
  // Every member, into its part of a checkpoint in parts: a sharded outer state's part, as a slice
  // (read_checkpoint joins them; nothing is gathered). A whole state's records go in save()'s file.
  void save_part(Checkpoint& part) const;
  std::int64_t rounds() const { return driver_.figures().rounds; }
  double waited_s() const { return waits_.waited_s; }
  // Time spent applying versions (or adopting a peer's state), joins included.
  double applied_s() const { return driver_.figures().applied_s; }
  // This site's share of the job summary: traffic, rounds, versions (leader only has traffic).
  nlohmann::json summary(std::size_t params) const;
  // The leader's cross-site figures for the site's metrics endpoint: version, staleness, live
  // sites and quorum, traffic per peer, codec ratio, refusals by cause, the link's measured figures
  // per peer ("links") and, under an emulated WAN, its faults ("wan_faults"). Empty for a one-site job.
  nlohmann::json ops_figures(std::size_t params) const;

 private:
  // Where this site sits in the job.
  struct Placement {
    int sites = 1;
    int data_offset = 0, data_replicas = 1;
  };
  // The leader's link, as built up: the transport, the WAN's shaping (when emulated) inside the
  // measurement.
  struct LinkStack {
    std::unique_ptr<Link> link;
    ShapedLink* shaped = nullptr;
    StripedLink* striped = nullptr;  // a split exchange
    MeasuredLink* measured = nullptr;
  };
  // The emulated WAN of a job that asks for one: its schedule and the operator's faults.
  struct WanEmulation {
    std::shared_ptr<WanSchedule> schedule;
    std::unique_ptr<WanControl> control;
  };
  struct Waits {
    std::function<void(const nlohmann::json&)> reporter;
    double waited_s = 0;  // time the replicas spent waiting on other sites
  };
  // WAN bytes of the launches before this one (restored from a checkpoint).
  struct TrafficCarry {
    std::uint64_t sent = 0, received = 0;
  };

  void ensure_leader_side();
  // A whole outer state as the site's newest checkpoint holds it (CrossSiteOptions::saved_state).
  std::optional<OuterState> saved_outer_state() const;
  // A replica that no longer leads lets go of its CrossSite, link and etcd client: leading again,
  // it builds them anew, as after a restart. One kept from an earlier lead would keep the site's
  // member record naming the dead leader's address until that process's lease lapsed (it writes
  // its key again only when the key or its own lease is gone), and would never scan the rounds
  // the leaders since announced.
  void release_leader_side();
  // Leader, under an emulated WAN: whether the job's start is known, agreeing on it if not yet.
  bool wan_started();
  void wait_together(Communicator& group, bool leader, const std::function<bool()>& attempt);
  // One call into the driver (`start`, on this replica's side), then attempts until it waits for
  // nothing; a wait is reported to the agent as it lasts.
  void drive(Communicator& group, bool leader, Trainer& trainer, const std::function<void(Replica&)>& start);
  void report_wait(double began, double& said_at) const;
  // [parallel] shard_outer: the outer state cut anew for the group just (re)formed (every member).
  void cut_outer(Communicator& group, bool leader, Trainer& trainer);
  // A split exchange: the replicas' lanes, opened at each join of the group (every member).
  void open_lanes(Communicator& group, bool leader);
  // ... and synced after each round attempt: orders and the peers' lanes out, stripes in.
  void sync_lanes(Communicator& group, bool leader);
  // What the members' lanes put on the WAN (the leader's link counts the rest of the site's bytes).
  std::uint64_t lanes_sent() const;
  std::unique_ptr<Link> lane_link(const std::function<const std::string*(const std::string&)>& site_of);
  void log_cross_site_events();
  // What the leader's link measured per peer site (round trip, bandwidth each way).
  nlohmann::json measured_links() const;

  // RoundEvents: the leader's log.
  void looked() override { log_cross_site_events(); }
  void encoded(std::vector<std::byte> bytes) override;
  void submitted(const DeltaAnnouncement&, std::span<const std::byte>) override {}
  void applied(const AppliedVersion& v) override;
  void dropped(std::int64_t round, std::int64_t step, std::int64_t version, int in_a_row) override;
  void fast_forwarded(std::int64_t from_step, std::int64_t step) override;
  void caught_up(std::int64_t from_version, std::int64_t version, double seconds) override;
  void mirrors_repaired(const std::vector<int>& replicas, std::int64_t version, std::size_t bytes) override;

  JobConfig config_;
  std::string site_;
  RunLog& log_;
  ExchangeClocks clocks_;
  Placement placement_;
  OuterState state_;
  // Version 0's hash, from the weights the trainer built (CrossSiteOptions::origin_hash); a sharded
  // state has none to give.
  std::optional<std::uint64_t> origin_hash_;
  std::function<std::optional<Checkpoint>()> newest_checkpoint_;  // the trainer's, read from the run directory
  RoundDriver driver_;
  std::unique_ptr<EtcdClient> etcd_;
  KeptParts kept_;  // peers' deltas' parts this replica keeps (before links_: its link keeps parts here)
  std::unique_ptr<DeltaJournal> parts_journal_;  // where it journals its part of a delta held in parts
  LinkStack links_;
  WanEmulation wan_;
  std::unique_ptr<CrossSite> cross_;
  std::unique_ptr<SiteLanes> lanes_;  // a split exchange between sites of several replicas
  // [parallel] shard_outer: the outer state's cut among the group's members, from its last join,
  // and at the leader the whole records gathered for the checkpoint being written.
  std::optional<ShardMap> outer_map_;
  mutable std::optional<Checkpoint> checkpoint_records_;  // taken by the save() that writes them
  Waits waits_;
  TrafficCarry carry_;
  std::uint64_t group_received_ = 0;
  std::vector<float> scratch_;  // the synchronous baseline's gradients and loss
};

}  // namespace meridian
