#include "intrasite/parallel/data_parallel.hpp"

#include <algorithm>
#include <cstring>
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

void shard_state(ReplicaSlot& slot, Communicator& comm, std::size_t params, int stage) {
  const auto map = std::make_shared<const ShardMap>(params, comm.size());
  slot.shard = map->part(comm.rank());
  slot.parts = map->counts();
  slot.barrier = [&comm] { comm.barrier(); };
  slot.gather = [&comm, map](std::span<float> weights) { comm.all_gather(weights, map->counts()); };
  slot.gather_unit_sums = [&comm, map](std::span<double> sums) {
    // The doubles travel as their bytes (two floats each): an all-gather copies, never adds.
    std::vector<std::size_t> counts;
    for (int r = 0; r < map->ranks(); ++r) {
      const ShardRange part = map->part(r);
      counts.push_back(2 * ((part.end() + map->unit() - 1) / map->unit() - part.offset / map->unit()));
    }
    std::vector<float> words(2 * sums.size());
    std::memcpy(words.data(), sums.data(), sums.size_bytes());
    comm.all_gather(words, counts);
    std::memcpy(sums.data(), words.data(), sums.size_bytes());
  };
  if (stage < 2) return;
  slot.mirror = map->part((comm.rank() + 1) % comm.size());
  slot.reduce_range = [&comm, map](std::span<float> grads, ShardRange range) {
    comm.reduce_scatter(grads.subspan(range.offset, range.count), map->cut(range), ReduceOp::Mean);
  };
  if (stage < 3) return;
  slot.gather_range = [&comm, map](std::span<float> weights, ShardRange range) {
    comm.all_gather(weights.subspan(range.offset, range.count), map->cut(range));
  };
  slot.shift = [&comm](std::span<const float> own, std::span<float> mirrored) { comm.ring_shift(own, mirrored); };
}

void reduce_scatter_grads(Communicator& comm, std::span<float> grads) {
  comm.reduce_scatter(grads, ShardMap(grads.size(), comm.size()).counts(), ReduceOp::Mean);
}

ReplicaSlot sharded_slot(Communicator& comm, std::size_t params, int stage) {
  ReplicaSlot slot;
  slot.rank = comm.rank();
  slot.world = comm.size();
  shard_state(slot, comm, params, stage);
  slot.reduce = [&comm, stage](std::span<float> grads, double& loss) {
    if (stage < 2) reduce_scatter_grads(comm, grads);
    average_loss(comm, loss);
  };
  return slot;
}

}  // namespace meridian
