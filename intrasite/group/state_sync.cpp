#include "intrasite/group/state_sync.hpp"

#include <cstring>
#include <vector>

#include "core/checkpoint/checkpoint.hpp"
#include "core/util/hash.hpp"

namespace meridian {

HealReport sync_state(Communicator& comm, Trainer& trainer) {
  // Everyone learns everyone's step: each writes its own slot, the sum fills them all. Steps are
  // exact in fp32 up to 2^24.
  std::vector<float> steps(comm.size(), 0.0f);
  steps[comm.rank()] = static_cast<float>(trainer.state().step + 1);
  comm.allreduce(steps, ReduceOp::Sum);
  HealReport report;
  for (int r = 1; r < comm.size(); ++r)
    if (steps[r] > steps[report.source_rank]) report.source_rank = r;

  const auto before = hash64(std::span<const float>(trainer.model().params()));
  std::vector<std::byte> bytes;
  if (comm.rank() == report.source_rank) bytes = encode_checkpoint(trainer.snapshot());
  std::uint64_t size = bytes.size();
  comm.broadcast(std::as_writable_bytes(std::span<std::uint64_t>(&size, 1)), report.source_rank);
  bytes.resize(size);
  comm.broadcast(bytes, report.source_rank);
  // The source restores too: a failed step may have moved its data position past its last completed step.
  trainer.restore(decode_checkpoint(bytes, "state of rank " + std::to_string(report.source_rank)),
                  "state of rank " + std::to_string(report.source_rank));
  report.step = trainer.state().step;
  report.bytes = size;
  report.changed = hash64(std::span<const float>(trainer.model().params())) != before;
  return report;
}

}  // namespace meridian
