#pragma once
// The group leader's side of the emulated WAN while the job runs: it reads the operator's faults
// from etcd (sim/emulator/operator_faults.hpp) every kFaultsReadEveryS and runs the config's
// faults followed by them, logs when the list changes and when a fault begins or ends here, and
// says what it runs and what its link measured, for the site's figures (`meridianctl wan`).
#include <functional>
#include <memory>
#include <optional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config/job_config.hpp"
#include "transport/link/measured_link.hpp"

namespace meridian {

class EtcdClient;
class RunLog;
class WanSchedule;

class WanControl {
 public:
  // `etcd`: the leader's client (same thread). `wall_clock`: the schedule's time base.
  WanControl(const JobConfig& config, std::string site, std::shared_ptr<WanSchedule> schedule, EtcdClient& etcd,
             RunLog& log, std::function<double()> wall_clock);

  // From the leader's pumps: reads the operator's list when due (an unreachable etcd is tried
  // again later: the schedule runs on as it was), and logs faults that began or ended.
  void tick();
  // {"start", "config": [...], "operator": [...]} for the leader's figures.
  nlohmann::json figures() const;

 private:
  void read_operator_faults(double now);

  std::vector<JobConfig::Wan::Fault> config_faults_, operator_faults_;
  std::string job_, site_;
  std::shared_ptr<WanSchedule> schedule_;
  EtcdClient& etcd_;
  RunLog& log_;
  std::function<double()> wall_clock_;
  double next_read_ = 0;
  std::optional<std::string> read_;    // the list's text as last read ("" before any operator wrote one)
  std::map<std::string, nlohmann::json> holding_;  // the faults holding at the last tick
};

// The measured figures of one peer for the leader's figures ("links"): round trip in ms, Mbit/s
// each way, their sample counts, and the wall time of their newest sample ("*_at").
nlohmann::json to_json(const MeasuredLink::Peer& p);

}  // namespace meridian
