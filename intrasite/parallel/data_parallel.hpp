#pragma once
// Synchronous data parallelism inside a site: every replica trains on its own stream of the data,
// and after the micro-batches of a step the gradients are averaged over the group, so every
// replica takes the same AdamW step and the copies stay bit-identical.
#include "core/train/trainer.hpp"
#include "intrasite/comm/communicator.hpp"
#include "intrasite/parallel/bucket_reducer.hpp"

namespace meridian {

// The trainer's slot for this communicator's rank: data stream rank of size, gradients and loss
// averaged with comm.allreduce. The communicator (and the reducer) must outlive the trainer. With
// a BucketReducer on the same communicator, gradients are reduced bucket by bucket during backward.
ReplicaSlot data_parallel_slot(Communicator& comm, BucketReducer* overlap = nullptr);

// The same with the optimizer's state sharded (ZeRO stage 1): each replica owns its part of
// ShardMap(params, comm.size()); the gradients are reduce-scattered, each replica updates its
// part, and the weights are all-gathered, so the copies still end every step bit-identical.
// Stage 2 reduce-scatters each range of the gradients as backward finishes it, and each replica
// keeps the gradients of its part only; every element is summed in the same (rank) order, so the
// weights stay those of stage 0 bit for bit. Stage 3 keeps the part's weights only and gathers
// each layer's as forward and backward reach it, the mirror kept by a ring shift after the update.
ReplicaSlot sharded_slot(Communicator& comm, std::size_t params, int stage = 1);

// The parts of such a slot, for a slot whose reduce does more (sites/replica): `slot` keeps the
// optimizer's state of its part of ShardMap(params, comm.size()) and all-gathers the weights and
// the gradients' per-unit sums of squares over comm; its reduce must leave each replica's part of
// the gradients reduced, as reduce_scatter_grads does. At stage 2 the slot's reduce_range also
// reduce-scatters a range of the gradients over the same map's cut of it (`reduce` need then only
// average the loss), and its mirror is the next rank's part, so the weights are gathered in place.
// At stage 3 also gather_range (an all-gather of the map's cut of a range) and shift (ring_shift).
void shard_state(ReplicaSlot& slot, Communicator& comm, std::size_t params, int stage);
void reduce_scatter_grads(Communicator& comm, std::span<float> grads);

}  // namespace meridian
