#pragma once
// A replica's sign of life: bumps hb/<id> in its site's store from its own thread and its own
// connection, so a replica blocked in a collective still shows as alive, and a stopped (SIGSTOP)
// or dead one stops showing.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace meridian {

class Heartbeat {
 public:
  Heartbeat(const std::string& endpoint, const std::string& secret, int id, std::chrono::milliseconds every);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace meridian
