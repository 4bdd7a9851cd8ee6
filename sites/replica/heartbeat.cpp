#include "sites/replica/heartbeat.hpp"

#include "core/util/error.hpp"
#include "intrasite/comm/tcp_store.hpp"
#include "intrasite/group/protocol.hpp"

namespace meridian {

Heartbeat::Heartbeat(const std::string& endpoint, const std::string& secret, int id, std::chrono::milliseconds every)
    : thread_([this, endpoint, secret, id, every] {
        TcpStoreClient store(endpoint, secret);
        while (!stop_) {
          try {
            store.add(site_keys::heartbeat(id), 1);
          } catch (const Error&) {
            // The agent may be restarting its store; the next beat retries.
          }
          std::unique_lock lock(mu_);
          cv_.wait_for(lock, every, [this] { return stop_.load(); });
        }
      }) {}

Heartbeat::~Heartbeat() {
  stop_ = true;
  cv_.notify_all();
  thread_.join();
}

}  // namespace meridian
