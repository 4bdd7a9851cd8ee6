#include "intrasite/parallel/bucket_reducer.hpp"

#include <utility>

namespace meridian {

BucketReducer::BucketReducer(Communicator& comm) : comm_(comm), thread_([this] { run(); }) {}

BucketReducer::~BucketReducer() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void BucketReducer::enqueue(std::span<float> bucket) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(bucket);
  }
  cv_.notify_all();
}

void BucketReducer::wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return (queue_.empty() && !busy_) || failure_; });
  if (failure_) {
    queue_.clear();
    std::rethrow_exception(std::exchange(failure_, nullptr));
  }
}

void BucketReducer::run() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || (!queue_.empty() && !failure_); });
    if (stop_) return;
    const auto bucket = queue_.front();
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    std::exception_ptr error;
    try {
      comm_.allreduce(bucket, ReduceOp::Mean);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    busy_ = false;
    if (error) failure_ = error;
    cv_.notify_all();
  }
}

}  // namespace meridian
