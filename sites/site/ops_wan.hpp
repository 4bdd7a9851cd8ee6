#pragma once
// The agent's side of `meridianctl wan`: what the site's links measured and what the emulated
// WAN runs (read-only, from the figures the group leader publishes), and the operator's changes to
// the fault schedule, written to etcd for every site's leader (sim/emulator/operator_faults.hpp).
// Runs on the agent's thread: a change costs the agent's loop one etcd round trip or two (its
// client gives up after kEtcdTimeout).
#include <chrono>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/config/job_config.hpp"
#include "sim/emulator/operator_faults.hpp"

namespace meridian {

class RunLog;

// The `wan` reply for `site` at wall-clock `wall_now`, from the leader's figures (`leader`: an
// empty object before its first): per peer the measured figures (ages instead of sample times),
// the configured link as it runs now and whether a fault holds; then every fault (config's and
// operator's) with its times in job seconds and wall clock, and whether it holds now.
nlohmann::json wan_report(const JobConfig& config, const std::string& site, const nlohmann::json& leader, double wall_now);

class OpsWan {
 public:
  static constexpr std::chrono::milliseconds kEtcdTimeout{3000};

  // `wall_clock`: the emulated WAN's time base (the job's start is a wall-clock time).
  OpsWan(const JobConfig& config, std::string site, RunLog& log, std::function<double()> wall_clock);

  nlohmann::json report(const nlohmann::json& leader) const { return wan_report(config_, site_, leader, wall_clock_()); }
  // {"ok": true, "fault": {...}, ...} or {"ok": false, "error": "..."}; logs wan_fault_added.
  nlohmann::json add_fault(const FaultRequest& request);
  // Clears the operator's faults (clear_faults): logs wan_faults_cleared.
  nlohmann::json clear_faults();

 private:
  // Replaces the operator's list by change(list, job seconds now) by compare-and-swap, again on a
  // lost race; returns the reply. `change` returns a refusal (a sentence) or the new list.
  using Change = std::function<std::variant<std::vector<WanFault>, std::string>(std::vector<WanFault>, double)>;
  nlohmann::json change_faults(const Change& change, const std::function<nlohmann::json(double)>& reply);

  JobConfig config_;
  std::string site_;
  RunLog& log_;
  std::function<double()> wall_clock_;
};

}  // namespace meridian
