#include "intrasite/group/state_sync.hpp"

#include <cstring>
#include <vector>

#include "core/checkpoint/checkpoint.hpp"
#include "core/model/shard_map.hpp"
#include "core/util/hash.hpp"

namespace meridian {
namespace {

// One row per member, filled by one sum: each writes its own. Every value is exact in fp32 (steps
// and units below 2^24).
struct Member {
  std::int64_t step = 0;
  bool ungathered = false;              // its last step failed in the all-gather
  std::size_t first_unit = 0, end_unit = 0;  // the moments it holds, in kShardUnit units
};

std::vector<Member> exchange_members(Communicator& comm, const Trainer& trainer) {
  constexpr int kWidth = 4;
  std::vector<float> rows(kWidth * static_cast<std::size_t>(comm.size()), 0.0f);
  const ShardRange held = trainer.moments_held();
  float* mine = rows.data() + kWidth * comm.rank();
  mine[0] = static_cast<float>(trainer.state().step + 1);
  mine[1] = trainer.holds_ungathered_update() ? 1.0f : 0.0f;
  mine[2] = static_cast<float>(held.offset / kShardUnit);
  mine[3] = static_cast<float>((held.end() + kShardUnit - 1) / kShardUnit);
  comm.allreduce(rows, ReduceOp::Sum);
  std::vector<Member> members(comm.size());
  for (int r = 0; r < comm.size(); ++r) {
    const float* row = rows.data() + kWidth * r;
    members[r] = {static_cast<std::int64_t>(row[0]) - 1, row[1] > 0, static_cast<std::size_t>(row[2]),
                  static_cast<std::size_t>(row[3])};
  }
  return members;
}

// At the step `target`: members there, and those whose failed all-gather another completed.
bool current(const Member& m, std::int64_t target) {
  return m.step == target || (m.ungathered && m.step + 1 == target);
}

// Each unit's moments from the lowest current member holding it, by one sum of parts that do not
// overlap; `lost` counts the elements nobody held (they stay zero).
std::vector<float> gather_moments(Communicator& comm, const Trainer& trainer, const std::vector<Member>& members,
                                  std::int64_t target, std::size_t& lost) {
  const AdamW& opt = trainer.optimizer();
  const std::size_t total = opt.total(), units = (total + kShardUnit - 1) / kShardUnit;
  std::vector<float> both(2 * total, 0.0f);  // m, then v
  lost = 0;
  for (std::size_t u = 0; u < units; ++u) {
    int from = -1;
    for (int r = 0; r < comm.size() && from < 0; ++r)
      if (current(members[r], target) && members[r].first_unit <= u && u < members[r].end_unit) from = r;
    const std::size_t begin = u * kShardUnit, end = std::min(total, begin + kShardUnit);
    if (from < 0) lost += end - begin;
    if (from != comm.rank()) continue;
    const std::size_t at = begin - opt.shard().offset;
    std::copy_n(opt.m().begin() + static_cast<std::ptrdiff_t>(at), end - begin, both.begin() + static_cast<std::ptrdiff_t>(begin));
    std::copy_n(opt.v().begin() + static_cast<std::ptrdiff_t>(at), end - begin,
                both.begin() + static_cast<std::ptrdiff_t>(total + begin));
  }
  comm.allreduce(both, ReduceOp::Sum);
  return both;
}

}  // namespace

HealReport sync_state(Communicator& comm, Trainer& trainer, std::optional<GroupPlace> place) {
  const auto members = exchange_members(comm, trainer);
  HealReport report;
  for (int r = 1; r < comm.size(); ++r)
    if (members[r].step > members[report.source_rank].step) report.source_rank = r;
  const std::int64_t target = members[report.source_rank].step;
  if (trainer.holds_ungathered_update() && trainer.state().step == target) trainer.undo_ungathered_update();
  const std::size_t total = trainer.param_count(), units = (total + kShardUnit - 1) / kShardUnit;
  bool parts = false;
  for (const auto& m : members) parts = parts || (current(m, target) && (m.first_unit != 0 || m.end_unit != units));

  const auto before = hash64(std::span<const float>(trainer.model().params()));
  std::vector<std::byte> bytes;
  if (comm.rank() == report.source_rank) bytes = encode_checkpoint(trainer.snapshot());
  std::uint64_t size = bytes.size();
  comm.broadcast(std::as_writable_bytes(std::span<std::uint64_t>(&size, 1)), report.source_rank);
  bytes.resize(size);
  comm.broadcast(bytes, report.source_rank);
  const std::string source = "state of rank " + std::to_string(report.source_rank);
  Checkpoint state = decode_checkpoint(bytes, source);
  if (parts) {
    const auto both = gather_moments(comm, trainer, members, target, report.moments_lost);
    put_whole_moments(state, std::span(both).first(total), std::span(both).subspan(total));
    report.bytes += both.size() * sizeof(float);
  }
  if (place) trainer.set_slot(std::move(place->slot), place->grad_accum);
  // The source restores too: a failed step may have moved its data position past its last completed step.
  trainer.restore(state, source);
  report.step = trainer.state().step;
  report.bytes += size;
  report.changed = hash64(std::span<const float>(trainer.model().params())) != before;
  return report;
}

}  // namespace meridian
