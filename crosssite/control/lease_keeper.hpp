#pragma once
// Keeps one etcd lease alive from its own thread and client, so a site that spends longer than
// the lease's TTL computing (H inner steps) does not vanish from the membership. If a renewal
// finds the lease gone (expired while the process was stopped, or revoked), lost() says so and
// the owner registers again; the keeper never throws from its thread.
//
// Give it every member of the cluster: its client fails over like any EtcdClient, so a renewal
// survives a member that died or stopped (costing at most options.request_timeout per stopped
// member it tries first). Keep request_timeout well under the lease's TTL minus `every`.
// A renewal no member could make is counted in failures() and tried again at the next beat.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "crosssite/control/change_feed.hpp"
#include "crosssite/control/etcd_client.hpp"

namespace meridian {

class LeaseKeeper final : public KeptLease {
 public:
  LeaseKeeper(EtcdOptions options, std::int64_t lease, std::chrono::milliseconds every);
  ~LeaseKeeper();  // stops the thread; does not revoke the lease
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  bool lost() const override { return lost_; }
  std::int64_t renewals() const { return renewals_; }
  std::int64_t failures() const { return failures_; }  // renewals that reached no member that could make them

 private:
  void run(EtcdOptions options, std::int64_t lease, std::chrono::milliseconds every);

  std::atomic<bool> stop_{false}, lost_{false};
  std::atomic<std::int64_t> renewals_{0}, failures_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace meridian
