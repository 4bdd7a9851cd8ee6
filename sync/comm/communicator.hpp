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

}  // namespace meridian
