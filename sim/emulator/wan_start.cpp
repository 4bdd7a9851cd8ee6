#include "sim/emulator/wan_start.hpp"

#include <charconv>
#include <chrono>

#include "core/util/error.hpp"

namespace meridian {

std::string wan_start_key(const std::string& job) { return "/meridian/" + job + "/wan/start"; }

void agree_wan_start(WanSchedule& schedule, EtcdClient& etcd, const std::string& job, double wall_now) {
  const std::string key = wan_start_key(job);
  char text[64];
  const auto written = std::to_chars(text, text + sizeof text, wall_now);
  // The loser of a race (or a restarted site) reads the winner's start.
  if (etcd.create_if_absent(key, std::string(text, written.ptr))) return schedule.set_start(wall_now);
  const auto stored = etcd.get(key);
  double start = 0;
  const auto read = std::from_chars(stored ? stored->data() : text, stored ? stored->data() + stored->size() : text, start);
  if (!stored || read.ec != std::errc() || read.ptr != stored->data() + stored->size())
    throw make_error(ErrorKind::Peer, "etcd key ", key, " holds no start time: ", stored ? *stored : "(missing)");
  schedule.set_start(start);
}

std::function<bool()> control_reachable(std::shared_ptr<const WanSchedule> schedule, std::string site,
                                        std::function<double()> clock) {
  return [schedule = std::move(schedule), site = std::move(site), clock = std::move(clock)] {
    return !schedule->cut_off(site, clock());
  };
}

double wall_clock_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace meridian
