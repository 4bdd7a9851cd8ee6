#pragma once
// What the replicas of one site do at the boundaries with the other sites of the job, for both
// outer algorithms: DiLoCo (a delta every H inner steps, applied when its commit arrives) and the
// synchronous baseline (gradients averaged across sites every step), on one path: the same
// leader-side CrossSite, link and control plane.
//
// Every member of the site's group calls these together. The group's rank 0 leads: it alone
// talks to other sites, while the others wait in short collectives, so no collective waits long
// enough to time out however long the other sites take. Every member keeps the OuterState and
// runs the same deterministic outer step, so any of them could lead.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "core/config/job_config.hpp"
#include <nlohmann/json.hpp>
#include "sync/comm/communicator.hpp"
#include "sync/round/outer_state.hpp"

namespace meridian {

class Trainer;
class RunLog;
class CrossSite;
class EtcdClient;
class Link;

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

  // Waits until every site of the job has joined.
  void join(Communicator& group, bool leader);
  // DiLoCo: true when the step just finished ends a round (every H steps, and the last step).
  bool round_ends(std::int64_t steps_done) const;
  // DiLoCo: sends this round's delta and waits for the next version, which replaces the trainer's weights.
  void end_round(Communicator& group, bool leader, Trainer& trainer, std::int64_t steps_in_round);
  // Sync: replaces the site's mean gradients and loss of this step by the mean over all sites.
  void reduce_across_sites(Communicator& group, bool leader, std::int64_t step, std::span<float> grads, double& loss);

  OuterState& state() { return state_; }
  std::int64_t rounds() const { return rounds_; }
  // This site's share of the job summary: traffic, rounds, versions (leader only has traffic).
  nlohmann::json summary(std::size_t params) const;

 private:
  void ensure_leader_side();
  void wait_together(Communicator& group, bool leader, const std::function<bool()>& attempt);

  JobConfig config_;
  std::string site_;
  RunLog& log_;
  std::function<double()> clock_;
  int sites_ = 1;
  int data_offset_ = 0, data_replicas_ = 1;
  OuterState state_;
  std::int64_t rounds_ = 0;
  std::unique_ptr<EtcdClient> etcd_;
  std::unique_ptr<Link> link_;
  std::unique_ptr<CrossSite> cross_;
  std::vector<float> scratch_;
};

}  // namespace meridian
