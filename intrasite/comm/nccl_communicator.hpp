#pragma once
// The GPU implementation of Communicator: NCCL, one communicator per group generation, one GPU
// per rank. The interface's buffers live on the host; each collective stages them through a
// device buffer of the communicator's own.
#include <chrono>
#include <memory>
#include <string>

#include "intrasite/comm/communicator.hpp"
#include "intrasite/comm/store.hpp"

namespace meridian {

struct NcclOptions {
  int device = 0;  // the CUDA device of this rank; two ranks of a group must not share one
  // Bounds the rendezvous and every later collective: a peer silent for this long is an Error(Timeout).
  std::chrono::milliseconds timeout{30000};
  // A group of one still makes its NCCL communicator and runs every collective through it (NCCL
  // takes a single rank): how a machine with one GPU runs NCCL's kernels (scripts/gpu-check.sh).
  // A site leaves it off: alone, the collectives have nothing to do.
  bool nccl_when_alone = false;
};

// Joins the group of `size` ranks under `prefix` in `store`: rank 0 publishes the NCCL unique id
// as "<prefix>nccl_id", the others read it. Each generation of a group needs a prefix of its own,
// as with connect_gloo. Error(Config) when options.device is not a usable CUDA device (no GPU,
// no driver); Error(Timeout) when the other ranks do not all show up within options.timeout;
// Error(Peer) naming the NCCL error when initialisation fails. size == 1 creates no NCCL
// communicator (unless options.nccl_when_alone) and its collectives are no-ops, but still
// requires the device.
//
// Collectives throw Error(Timeout) when they do not complete within options.timeout and
// Error(Peer) naming the NCCL or CUDA error otherwise. Either way the NCCL communicator has been
// aborted and this one is unusable; the survivors build a new one under a new prefix.
//
// Makes options.device current only for the duration of each call, so any thread may drive it
// (one at a time). Destruction waits at most options.timeout for peers to quiesce, then aborts.
std::unique_ptr<Communicator> connect_nccl(Store& store, const std::string& prefix, int rank, int size,
                                           const NcclOptions& options);

}  // namespace meridian
