#pragma once
// The job's emulated WAN over time: each pair's link from [wan] and [[wan.link]], changed by the
// [[wan.fault]] schedule while a fault holds. Times in the schedule are seconds from the job's
// start, a wall-clock time every site agrees on (wan_start.hpp); queries take wall-clock seconds,
// so the sites of one machine (or of NTP-synchronised machines) see every fault begin and end
// together. Safe to share between threads (the lease keeper asks from its own).
//
// The fault list can be replaced while the job runs (replace_faults): the entry point for an
// operator's command that partitions or slows links by hand.
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/config/job_config.hpp"

namespace meridian {

class WanSchedule {
 public:
  using Fault = JobConfig::Wan::Fault;

  explicit WanSchedule(const JobConfig& config);

  // The job's start (wall-clock seconds); before it is known no fault holds.
  void set_start(double wall_s);
  std::optional<double> start() const;

  void replace_faults(std::vector<Fault> faults);
  std::vector<Fault> faults() const;

  // At wall-clock time `now`: whether a partition holds `site` apart from the others (it then
  // reaches neither their links nor the control plane).
  bool cut_off(std::string_view site, double now) const;
  // Whether a and b are on different sides of a partition.
  bool partitioned(std::string_view a, std::string_view b, double now) const;
  // The link a <-> b: its configured figures, with bandwidth faults (the lowest holding) and
  // latency faults (added up) applied. A site the job does not name gets the default link.
  WanLink link(std::string_view a, std::string_view b, double now) const;

 private:
  // The faults holding at `now`; the caller holds mu_.
  std::vector<const Fault*> holding(double now) const;

  WanLink default_link_;
  std::map<std::pair<std::string, std::string>, WanLink> pairs_;  // (a, b) with a < b
  mutable std::mutex mu_;
  std::optional<double> start_;
  std::vector<Fault> faults_;
};

}  // namespace meridian
