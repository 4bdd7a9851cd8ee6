#include "intrasite/parallel/data_parallel.hpp"

namespace meridian {

ReplicaSlot data_parallel_slot(Communicator& comm, BucketReducer* overlap) {
  ReplicaSlot slot;
  slot.rank = comm.rank();
  slot.world = comm.size();
  if (overlap) slot.bucket_ready = [overlap](std::span<float> bucket) { overlap->enqueue(bucket); };
  slot.reduce = [&comm, overlap](std::span<float> grads, double& loss) {
    if (overlap) overlap->wait();
    else comm.allreduce(grads, ReduceOp::Mean);
    // The reported loss is the group's: a tiny second collective, negligible next to the gradients.
    float l = static_cast<float>(loss);
    comm.allreduce(std::span<float>(&l, 1), ReduceOp::Mean);
    loss = l;
  };
  return slot;
}

}  // namespace meridian
