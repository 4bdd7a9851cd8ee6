#pragma once
// What a site needs to run under the emulated WAN: the job's start, agreed by every site through
// etcd (the first site to ask writes its wall clock; a site that starts or restarts later reads
// it), and the control plane's side of a partition.
#include <functional>
#include <memory>
#include <string>

#include "sim/emulator/wan_schedule.hpp"
#include "crosssite/control/etcd_client.hpp"

namespace meridian {

// The etcd key holding the job's start for the emulated WAN.
std::string wan_start_key(const std::string& job);

// Sets schedule's start from etcd, creating the key with `wall_now` if no site did yet. Throws
// what the client throws when etcd cannot be reached: call again later.
void agree_wan_start(WanSchedule& schedule, EtcdClient& etcd, const std::string& job, double wall_now);

// For EtcdOptions::reachable: false while the schedule cuts `site` off. `clock`: wall-clock seconds.
std::function<bool()> control_reachable(std::shared_ptr<const WanSchedule> schedule, std::string site,
                                        std::function<double()> clock);

// Wall-clock seconds since the epoch: the time base sites on different processes share.
double wall_clock_s();

}  // namespace meridian
