#include "intrasite/parallel/data_parallel.hpp"

#include <memory>

#include "core/model/shard_map.hpp"

namespace meridian {
namespace {

// The reported loss is the group's: a tiny second collective, negligible next to the gradients.
void average_loss(Communicator& comm, double& loss) {
  float l = static_cast<float>(loss);
  comm.allreduce(std::span<float>(&l, 1), ReduceOp::Mean);
  loss = l;
}

}  // namespace

ReplicaSlot data_parallel_slot(Communicator& comm, BucketReducer* overlap) {
  ReplicaSlot slot;
  slot.rank = comm.rank();
  slot.world = comm.size();
  if (overlap) slot.bucket_ready = [overlap](std::span<float> bucket) { overlap->enqueue(bucket); };
  slot.reduce = [&comm, overlap](std::span<float> grads, double& loss) {
    if (overlap) overlap->wait();
    else comm.allreduce(grads, ReduceOp::Mean);
    average_loss(comm, loss);
  };
  return slot;
}

void shard_optimizer_state(ReplicaSlot& slot, Communicator& comm, std::size_t params) {
  const auto map = std::make_shared<const ShardMap>(params, comm.size());
  slot.shard = map->part(comm.rank());
  slot.gather = [&comm, map](std::span<float> weights) { comm.all_gather(weights, map->counts()); };
  slot.sum = [&comm](double x) {
    // A double as two floats, its high part and the rest: the sum keeps ~48 bits, not 24.
    const float high = static_cast<float>(x);
    float parts[2] = {high, static_cast<float>(x - high)};
    comm.allreduce(parts, ReduceOp::Sum);
    return static_cast<double>(parts[0]) + parts[1];
  };
}

void reduce_scatter_grads(Communicator& comm, std::span<float> grads) {
  comm.reduce_scatter(grads, ShardMap(grads.size(), comm.size()).counts(), ReduceOp::Mean);
}

ReplicaSlot sharded_slot(Communicator& comm, std::size_t params) {
  ReplicaSlot slot;
  slot.rank = comm.rank();
  slot.world = comm.size();
  shard_optimizer_state(slot, comm, params);
  slot.reduce = [&comm](std::span<float> grads, double& loss) {
    reduce_scatter_grads(comm, grads);
    average_loss(comm, loss);
  };
  return slot;
}

}  // namespace meridian
