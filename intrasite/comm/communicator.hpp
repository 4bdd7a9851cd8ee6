#pragma once
// Collectives inside a site, over the flat fp32 buffers of core/. One interface, one
// implementation per fabric: Gloo on CPUs (gloo_communicator), NCCL on GPUs (nccl_communicator).
// A peer that dies or hangs surfaces as Error(Peer) or Error(Timeout): expected, recoverable by
// building a new communicator for the survivors under a new generation prefix.
#include <chrono>
#include <cstddef>
#include <span>

namespace meridian {

enum class ReduceOp { Sum, Mean };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place; every rank ends with the same values.
  virtual void allreduce(std::span<float> data, ReduceOp op) = 0;
  // In place; every rank ends with root's bytes.
  virtual void broadcast(std::span<std::byte> data, int root) = 0;
  virtual void barrier() = 0;
};

// Sum -> mean after an all-reduce. Every rank scales the same sums by the same factor, so the
// means stay bit-identical across ranks; implementations sum and then call this.
inline void scale_to_mean(std::span<float> sums, int size) {
  const float scale = 1.0f / static_cast<float>(size);
  for (float& x : sums) x *= scale;
}

}  // namespace meridian
