#include "crosssite/control/lease_keeper.hpp"

#include "core/util/error.hpp"

namespace meridian {

LeaseKeeper::LeaseKeeper(EtcdOptions options, std::int64_t lease, std::chrono::milliseconds every)
    : thread_([this, options = std::move(options), lease, every] { run(options, lease, every); }) {}

LeaseKeeper::~LeaseKeeper() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void LeaseKeeper::run(EtcdOptions options, std::int64_t lease, std::chrono::milliseconds every) {
  std::unique_lock lock(mu_);
  try {
    EtcdClient etcd(std::move(options));
    while (!cv_.wait_for(lock, every, [this] { return stop_.load(); })) {
      lock.unlock();
      try {
        etcd.keep_alive(lease);
        ++renewals_;
      } catch (const EtcdLeaseGone&) {
        lost_ = true;  // etcd no longer knows the lease: the owner registers again
      } catch (const Error&) {
        // No member could renew it this time (the client already tried every endpoint): the next
        // beat tries again, and the lease lives on in etcd until its TTL runs out.
        ++failures_;
      }
      lock.lock();
      if (lost_) return;
    }
  } catch (const Error&) {
    lost_ = true;  // no usable endpoint list: the owner's own client will say why
  }
}

}  // namespace meridian
