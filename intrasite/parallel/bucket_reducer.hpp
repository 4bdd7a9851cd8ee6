#pragma once
// All-reduces gradient buckets on a communication thread while backward computes the next ones
// (DDP's overlap): Gpt::backward reports each layer's gradients as final, they are queued here,
// and the step waits only for what is still in flight when backward ends.
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <span>
#include <thread>

#include "intrasite/comm/communicator.hpp"

namespace meridian {

class BucketReducer {
 public:
  explicit BucketReducer(Communicator& comm);
  ~BucketReducer();
  BucketReducer(const BucketReducer&) = delete;
  BucketReducer& operator=(const BucketReducer&) = delete;

  // Averages `bucket` over the group, in order with the buckets before it (every rank must enqueue
  // the same buckets in the same order, as backward does).
  void enqueue(std::span<float> bucket);
  // Blocks until every enqueued bucket is reduced; rethrows the first failure (Error(Peer/Timeout))
  // after which the communicator is unusable and later buckets were dropped.
  void wait();

 private:
  void run();

  Communicator& comm_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::span<float>> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::exception_ptr failure_;
  std::thread thread_;  // last: starts after everything it uses exists
};

}  // namespace meridian
