#include "intrasite/group/state_sync.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/checkpoint/checkpoint.hpp"
#include "core/model/shard_map.hpp"
#include "core/util/error.hpp"
#include "core/util/hash.hpp"

namespace meridian {
namespace {

// One row per member, filled by one sum: each writes its own. Every value is exact in fp32 (steps
// and units below 2^24).
struct Member {
  std::int64_t step = 0;
  bool ungathered = false;              // its last step failed in the all-gather
  std::size_t first_unit = 0, end_unit = 0;  // the moments it holds, in kShardUnit units
  std::size_t mirror_first = 0, mirror_end = 0;  // the weights it mirrors (Trainer::mirror_held)
  // Stage 3: it holds only its part of the weights, as of own_step (one past `step` when its step
  // failed after the update), and the mirrored one as of mirror_step; it can undo its last update.
  std::int64_t mirror_step = -1, own_step = -1;
  bool sharded = false, undoable = false;
  // It holds the first parts of the weights it was built with (Trainer::holds_first_parts), and
  // they are its new place's.
  bool first_parts = false, in_place = false;
  bool covers(std::size_t unit) const { return first_unit <= unit && unit < end_unit; }
  bool mirrors(std::size_t unit) const { return mirror_first <= unit && unit < mirror_end; }
};

std::vector<Member> exchange_members(Communicator& comm, const Trainer& trainer,
                                     const std::optional<GroupPlace>& place) {
  constexpr int kWidth = 12;
  std::vector<float> rows(kWidth * static_cast<std::size_t>(comm.size()), 0.0f);
  const auto units = [](ShardRange r) {
    return std::pair{static_cast<float>(r.offset / kShardUnit), static_cast<float>((r.end() + kShardUnit - 1) / kShardUnit)};
  };
  float* mine = rows.data() + kWidth * comm.rank();
  mine[0] = trainer.holds_torn_state() ? 0.0f : static_cast<float>(trainer.state().step + 1);  // -1: none
  mine[1] = trainer.holds_ungathered_update() ? 1.0f : 0.0f;
  std::tie(mine[2], mine[3]) = units(trainer.moments_held());
  if (trainer.mirror_held().count > 0) std::tie(mine[4], mine[5]) = units(trainer.mirror_held());
  mine[6] = static_cast<float>(trainer.mirror_step() + 1);
  mine[7] = trainer.weights_sharded() ? 1.0f : 0.0f;
  mine[8] = static_cast<float>(trainer.own_part_step() + 1);
  mine[9] = trainer.can_undo_update() ? 1.0f : 0.0f;
  mine[10] = trainer.holds_first_parts() && !trainer.holds_torn_state() ? 1.0f : 0.0f;
  mine[11] = place && trainer.first_parts_in_place(place->slot) ? 1.0f : 0.0f;
  comm.allreduce(rows, ReduceOp::Sum);
  std::vector<Member> members(comm.size());
  for (int r = 0; r < comm.size(); ++r) {
    const float* row = rows.data() + kWidth * r;
    members[r] = {static_cast<std::int64_t>(row[0]) - 1,
                  row[1] > 0,
                  static_cast<std::size_t>(row[2]),
                  static_cast<std::size_t>(row[3]),
                  static_cast<std::size_t>(row[4]),
                  static_cast<std::size_t>(row[5]),
                  static_cast<std::int64_t>(row[6]) - 1,
                  static_cast<std::int64_t>(row[8]) - 1,
                  row[7] > 0,
                  row[9] > 0,
                  row[10] > 0,
                  row[11] > 0};
  }
  return members;
}

// At the step `target`: members there, and those whose failed all-gather another completed.
bool current(const Member& m, std::int64_t target) {
  return m.step == target || (m.ungathered && m.step + 1 == target);
}

// Copies unit `u`'s moments from m and v, which start at element `from`, into to_m and to_v, which
// start at element `to`.
void copy_unit(std::size_t total, std::size_t u, std::span<const float> m, std::span<const float> v, std::size_t from,
               std::span<float> to_m, std::span<float> to_v, std::size_t to) {
  const std::size_t begin = u * kShardUnit, count = std::min(total, begin + kShardUnit) - begin;
  std::copy_n(m.begin() + static_cast<std::ptrdiff_t>(begin - from), count,
              to_m.begin() + static_cast<std::ptrdiff_t>(begin - to));
  std::copy_n(v.begin() + static_cast<std::ptrdiff_t>(begin - from), count,
              to_v.begin() + static_cast<std::ptrdiff_t>(begin - to));
}

// A checkpoint's moments of the elements [offset, offset + m.size()).
struct SavedMoments {
  std::vector<float> m, v;
  std::size_t offset = 0;
  std::int64_t step = 0;
};

// The newest checkpoint on this member's disk that has the moments (a site's file, not a shard's
// snapshot), for `range`, the units no member holds: of a checkpoint in parts only the part files
// that hold them are read.
std::optional<SavedMoments> newest_moments(Trainer& trainer, ShardRange range) {
  try {
    const auto newest = trainer.newest_checkpoint_head();
    if (!newest) return std::nullopt;
    const Checkpoint& head = newest->checkpoint.head;
    SavedMoments saved{{}, {}, range.offset, head.get_value<std::int64_t>("train.step")};
    if (const auto& parts = newest->checkpoint.parts) {
      if (parts->total() != trainer.param_count()) return std::nullopt;
      const Checkpoint moments = parts->moments(range.offset, range.count);
      saved.m = moments.get_pod<float>("adamw.m");
      saved.v = moments.get_pod<float>("adamw.v");
      return saved;
    }
    if (!head.has("adamw.m") || !head.has("adamw.v")) return std::nullopt;
    const auto m = head.view_pod<float>("adamw.m"), v = head.view_pod<float>("adamw.v");
    if (m.size() != trainer.param_count() || v.size() != m.size()) return std::nullopt;
    saved.m.assign(m.begin() + static_cast<std::ptrdiff_t>(range.offset),
                   m.begin() + static_cast<std::ptrdiff_t>(range.end()));
    saved.v.assign(v.begin() + static_cast<std::ptrdiff_t>(range.offset),
                   v.begin() + static_cast<std::ptrdiff_t>(range.end()));
    return saved;
  } catch (const Error& e) {  // a file that is not what it should be: the holes restart from zero
    if (e.kind() != ErrorKind::Checkpoint && e.kind() != ErrorKind::Io) throw;
    return std::nullopt;
  }
}

struct MomentsPart {
  std::vector<float> m, v;
};

// This member's range `next` of the new cut's moments: each unit from the lowest current member
// holding it, and those nobody holds from the source's newest checkpoint (else zero). One sum of
// parts that do not overlap per window of `window_units` units, each member keeping what falls in
// `next`: no member holds more than its new part and one window (the checkpoint's step + 1 travels
// at each window's end; 0: none was used).
MomentsPart repartition_moments(Communicator& comm, Trainer& trainer, const std::vector<Member>& members,
                                std::int64_t target, bool source, ShardRange next, std::size_t window_units,
                                HealReport& report) {
  const AdamW& opt = trainer.optimizer();
  const std::size_t total = opt.total(), units = (total + kShardUnit - 1) / kShardUnit;
  std::vector<int> giver(units, -1);
  std::size_t holes_elements = 0, first_hole = units, end_hole = 0;
  for (std::size_t u = 0; u < units; ++u) {
    for (int r = 0; r < comm.size() && giver[u] < 0; ++r)
      if (current(members[r], target) && members[r].covers(u)) giver[u] = r;
    if (giver[u] >= 0) continue;
    holes_elements += std::min(total, (u + 1) * kShardUnit) - u * kShardUnit;
    first_hole = std::min(first_hole, u);
    end_hole = u + 1;
  }
  std::optional<SavedMoments> saved;
  if (source && holes_elements > 0) {
    const std::size_t begin = first_hole * kShardUnit;
    saved = newest_moments(trainer, {begin, std::min(total, end_hole * kShardUnit) - begin});
  }
  MomentsPart out{std::vector<float>(next.count), std::vector<float>(next.count)};
  std::vector<float> window;
  float checkpoint_step = 0;
  for (std::size_t first = 0; first < units; first += window_units) {
    const std::size_t last = std::min(units, first + window_units);
    const std::size_t begin = first * kShardUnit, end = std::min(total, last * kShardUnit), n = end - begin;
    window.assign(2 * n + 1, 0.0f);
    const std::span<float> m(window.data(), n), v(window.data() + n, n);
    for (std::size_t u = first; u < last; ++u) {
      if (giver[u] == comm.rank())
        copy_unit(total, u, opt.m(), opt.v(), opt.shard().offset, m, v, begin);
      else if (giver[u] < 0 && saved)
        copy_unit(total, u, saved->m, saved->v, saved->offset, m, v, begin);
    }
    if (saved) window.back() = static_cast<float>(saved->step + 1);
    comm.allreduce(window, ReduceOp::Sum);
    checkpoint_step = std::max(checkpoint_step, window.back());
    report.moments_scratch_bytes = std::max(report.moments_scratch_bytes, window.size() * sizeof(float));
    const std::size_t from = std::max(begin, next.offset), to = std::min(end, next.end());
    if (from < to) {
      std::copy(m.begin() + static_cast<std::ptrdiff_t>(from - begin),
                m.begin() + static_cast<std::ptrdiff_t>(to - begin),
                out.m.begin() + static_cast<std::ptrdiff_t>(from - next.offset));
      std::copy(v.begin() + static_cast<std::ptrdiff_t>(from - begin),
                v.begin() + static_cast<std::ptrdiff_t>(to - begin),
                out.v.begin() + static_cast<std::ptrdiff_t>(from - next.offset));
    }
  }
  report.bytes += 2 * total * sizeof(float);
  if (checkpoint_step > 0) {
    report.moments_from_checkpoint = holes_elements;
    report.checkpoint_step = static_cast<std::int64_t>(checkpoint_step) - 1;
  } else {
    report.moments_lost = holes_elements;
  }
  return out;
}

// Whether every member already holds its part of the new cut, at the step the group goes on from
// (the same members regrouped in the same order): then nothing is re-cut. One sum.
bool moments_in_place(Communicator& comm, const Member& mine, std::int64_t target, const Trainer& trainer,
                      ShardRange next) {
  float misplaced = current(mine, target) && trainer.moments_held() == next ? 0.0f : 1.0f;
  comm.allreduce(std::span<float>(&misplaced, 1), ReduceOp::Sum);
  return misplaced == 0.0f;
}

// Who holds unit `u`'s weights as they were at step `target`, when every member's all-gather of
// the step after it failed in place: a member that never began that step holds them all; else the
// unit's owner (its part undone), else the member that mirrored it; -1 when none.
int holder_of_undone(const std::vector<Member>& members, std::int64_t target, std::size_t u) {
  const auto undone = [&](const Member& m) { return m.ungathered && m.step == target; };
  for (std::size_t r = 0; r < members.size(); ++r)
    if (members[r].step == target && !members[r].ungathered) return static_cast<int>(r);
  for (std::size_t r = 0; r < members.size(); ++r)
    if (undone(members[r]) && members[r].covers(u)) return static_cast<int>(r);
  for (std::size_t r = 0; r < members.size(); ++r)
    if (undone(members[r]) && members[r].mirrors(u)) return static_cast<int>(r);
  return -1;
}

// Every member ends with the weights whole: each run of units whose holder (`holder_of(u)`) is
// the same goes out from it. Units nobody holds (-1) stay as the member has them, and are counted.
template <class HolderOf>
void broadcast_runs(Communicator& comm, std::span<float> params, HolderOf holder_of, HealReport& report) {
  const std::size_t units = (params.size() + kShardUnit - 1) / kShardUnit;
  for (std::size_t u = 0; u < units;) {
    const int from = holder_of(u);
    std::size_t end = u + 1;
    while (end < units && holder_of(end) == from) ++end;
    const auto run = params.subspan(u * kShardUnit, std::min(params.size(), end * kShardUnit) - u * kShardUnit);
    if (from < 0) report.weights_lost += run.size();
    else comm.broadcast(std::as_writable_bytes(run), from);
    u = end;
  }
}

// After an in-place all-gather that failed on every member, each undid its own part and its
// mirrored one: the weights of step `target` are put back from their holders. Units nobody holds
// (an owner and the rank mirroring it both died) stay as the source has them.
void reassemble_weights(Communicator& comm, Trainer& trainer, const std::vector<Member>& members,
                        std::int64_t target, HealReport& report) {
  broadcast_runs(comm, trainer.bulk().params, [&](std::size_t u) { return holder_of_undone(members, target, u); },
                 report);
}

// Stage 3: whether a member's own part is at step `target`, as it is or once its last update is
// undone (which also takes its training state back to that step).
bool part_at(const Member& m, std::int64_t target) {
  return m.own_step == target || (m.undoable && m.own_step == target + 1);
}

// Who holds unit `u`'s weights as they were at step `target`: a member with whole weights there,
// else the unit's owner, else the member mirroring it; -1 when none.
int sharded_holder(const std::vector<Member>& members, std::int64_t target, std::size_t u) {
  for (std::size_t r = 0; r < members.size(); ++r)
    if (!members[r].sharded && members[r].step == target) return static_cast<int>(r);
  for (std::size_t r = 0; r < members.size(); ++r)
    if (members[r].sharded && members[r].covers(u) && part_at(members[r], target)) return static_cast<int>(r);
  for (std::size_t r = 0; r < members.size(); ++r)
    if (members[r].sharded && members[r].mirrors(u) && members[r].mirror_step == target) return static_cast<int>(r);
  return -1;
}

// The newest step the members still hold whole among them: the most advanced member's, or the one
// before when a dead rank's part of it never reached its mirror (the shift after the update
// failed). When neither is whole, the newest, with the units nobody holds counted.
std::int64_t sharded_target(const std::vector<Member>& members, std::size_t units) {
  std::int64_t newest = members[0].step;
  for (const auto& m : members) newest = std::max(newest, m.step);
  const auto whole = [&](std::int64_t target) {
    for (std::size_t u = 0; u < units; ++u)
      if (sharded_holder(members, target, u) < 0) return false;
    return true;
  };
  return whole(newest) || !whole(newest - 1) ? newest : newest - 1;
}

// Every member ends with the weights of step `target` whole, each run of units from its holder
// (a mirror first copied into the weights' buffer of the member that holds it).
void reassemble_sharded_weights(Communicator& comm, Trainer& trainer, const std::vector<Member>& members,
                                std::int64_t target, HealReport& report) {
  if (trainer.weights_sharded() && trainer.mirror_step() == target) trainer.mirror_into_weights();
  const auto params = trainer.bulk().params;
  broadcast_runs(comm, params, [&](std::size_t u) { return sharded_holder(members, target, u); }, report);
  report.bytes += params.size_bytes();
}

// Stage 3: the members settle on the newest step they hold whole, undo an update past it, and put
// the weights together. The source is a member whose training state is at that step; afterwards a
// member counts as there (for the moments) when its own part is.
std::int64_t settle_sharded_weights(Communicator& comm, Trainer& trainer, std::vector<Member>& members,
                                    HealReport& report) {
  const std::size_t units = (trainer.param_count() + kShardUnit - 1) / kShardUnit;
  const std::int64_t target = sharded_target(members, units);
  if (trainer.weights_sharded() && trainer.can_undo_update() && trainer.own_part_step() == target + 1)
    trainer.undo_ungathered_update();
  reassemble_sharded_weights(comm, trainer, members, target, report);
  const auto undone = [&](const Member& m) { return m.sharded && m.undoable && m.own_step == target + 1; };
  report.source_rank = -1;
  for (std::size_t r = 0; r < members.size() && report.source_rank < 0; ++r)
    if ((undone(members[r]) ? target : members[r].step) == target) report.source_rank = static_cast<int>(r);
  MERIDIAN_CHECK(report.source_rank >= 0, "no member holds the training state of step ", target);
  for (auto& m : members) {
    if (m.sharded) m.step = part_at(m, target) ? target : -2;
    m.ungathered = false;
  }
  return target;
}

// Per member, whether its state fingerprint differs from the source's (`moments` false: but for the
// moments; `weights` false: but for the weights too).
std::vector<bool> differing(Communicator& comm, Trainer& trainer, int source, bool moments, bool weights = true) {
  const auto fingerprints = all_hashes(comm, trainer.state_fingerprint(moments, weights));
  std::vector<bool> out;
  for (const std::uint64_t f : fingerprints) out.push_back(f != fingerprints[static_cast<std::size_t>(source)]);
  return out;
}

bool same_state(Communicator& comm, Trainer& trainer, int source, bool moments, bool weights = true) {
  const auto differ = differing(comm, trainer, source, moments, weights);
  return std::find(differ.begin(), differ.end(), true) == differ.end();
}

}  // namespace

HealReport sync_state(Communicator& comm, Trainer& trainer, std::optional<GroupPlace> place, std::size_t window_units) {
  MERIDIAN_CHECK(window_units >= 1, "a heal's window of ", window_units, " units");
  auto members = exchange_members(comm, trainer, place);
  if (std::all_of(members.begin(), members.end(), [](const Member& m) { return m.step < 0; }))
    throw StateLost(ErrorKind::Peer,
                    "every member of this group (" + std::to_string(comm.size()) +
                        ") lost its training state: each was taking a heal's state when its source died, and none "
                        "holds a step's state to heal from");
  HealReport report;
  // Members built holding their first parts of the weights (ZeRO stage 3) move nothing when the
  // group cuts them alike and the rest of their state is the same; otherwise each builds the whole
  // initial weights from the seed, and the heal goes on as for members built whole.
  const auto all = [&](bool Member::*flag) {
    return std::all_of(members.begin(), members.end(), [&](const Member& m) { return m.*flag; });
  };
  if (all(&Member::first_parts)) {
    if (all(&Member::in_place) && same_state(comm, trainer, 0, false, false)) {
      trainer.set_slot(std::move(place->slot), place->grad_accum);
      report.step = trainer.state().step;
      report.first_parts_kept = true;
      return report;
    }
    trainer.build_initial_weights();
    for (auto& m : members) m.sharded = false;
  }
  const std::int64_t own_step = trainer.state().step;
  const bool was_torn = trainer.holds_torn_state();  // its weights may be the source's already, the rest not
  std::uint64_t before = 0;
  bool sharded = false;  // stage 3: nobody holds the weights whole, they are put together first
  for (const auto& m : members) sharded = sharded || m.sharded;
  std::int64_t target = 0;
  if (sharded) {
    target = settle_sharded_weights(comm, trainer, members, report);
  } else {
    for (int r = 1; r < comm.size(); ++r)
      if (members[r].step > members[report.source_rank].step) report.source_rank = r;
    target = members[report.source_rank].step;
    if (trainer.holds_ungathered_update() && trainer.state().step == target) trainer.undo_ungathered_update();
    bool torn = false;  // an all-gather in place failed on every member
    for (const auto& m : members) torn = torn || (m.ungathered && m.step == target && m.mirror_end > m.mirror_first);
    if (torn) reassemble_weights(comm, trainer, members, target, report);
    before = hash64(std::span<const float>(trainer.bulk().params));
  }
  const std::size_t total = trainer.param_count(), units = (total + kShardUnit - 1) / kShardUnit;
  bool whole = true;  // every member keeps the whole model's moments
  for (const auto& m : members) whole = whole && m.first_unit == 0 && m.end_unit == units;

  // Members that hold the same state (a first join: every replica built it from the same seed, or
  // resumed from the same checkpoint) move nothing; the hash reads every buffer in place. Members
  // that hold parts of the moments (built as their first part, or read from a checkpoint's parts)
  // compare the rest, and move nothing when each already holds its new part at that step.
  const ShardRange next = place ? place->slot.shard.value_or(ShardRange{0, total}) : trainer.moments_held();
  std::vector<bool> differ(members.size(), true);
  differ[static_cast<std::size_t>(report.source_rank)] = false;
  if (!sharded) differ = differing(comm, trainer, report.source_rank, whole);
  const bool mine_differs = differ[static_cast<std::size_t>(comm.rank())];
  if (!sharded && std::find(differ.begin(), differ.end(), true) == differ.end() &&
      (whole || moments_in_place(comm, members[static_cast<std::size_t>(comm.rank())], target, trainer, next))) {
    if (place) trainer.set_slot(std::move(place->slot), place->grad_accum);
    trainer.set_torn_state(false);  // a failed heal that had written everything: it holds the source's state
    report.step = trainer.state().step;
    return report;
  }
  // The records go as one small checkpoint; the weights and the moments straight into the
  // members' buffers, so a heal holds no copy of them.
  const int from = report.source_rank;
  std::vector<std::byte> bytes;
  if (comm.rank() == from) bytes = encode_checkpoint(trainer.snapshot_meta());
  std::uint64_t size = bytes.size();
  comm.broadcast(std::as_writable_bytes(std::span<std::uint64_t>(&size, 1)), from);
  bytes.resize(size);
  comm.broadcast(bytes, from);
  const std::string source = "state of rank " + std::to_string(from);
  const Checkpoint meta = decode_checkpoint(bytes, source);
  const Trainer::Bulk bulk = trainer.bulk();
  report.bytes += size;
  // From here a member whose state differs holds parts of two (the sum that re-cuts the moments
  // writes nothing in place until it ends).
  if (mine_differs && (!sharded || whole)) trainer.set_torn_state(true);
  if (!sharded) {  // sharded, every member has put them together already
    comm.broadcast(std::as_writable_bytes(bulk.params), from);
    report.bytes += bulk.params.size_bytes();
  }
  if (whole) {
    comm.broadcast(std::as_writable_bytes(bulk.m), from);
    comm.broadcast(std::as_writable_bytes(bulk.v), from);
    report.bytes += 2 * bulk.m.size_bytes();
    if (place) trainer.set_slot(std::move(place->slot), place->grad_accum);
  } else {
    if (moments_in_place(comm, members[static_cast<std::size_t>(comm.rank())], target, trainer, next)) {
      if (place) trainer.set_slot(std::move(place->slot), place->grad_accum);
    } else {
      const auto part =
          repartition_moments(comm, trainer, members, target, comm.rank() == from, next, window_units, report);
      if (place) trainer.set_slot(std::move(place->slot), place->grad_accum);
      MERIDIAN_CHECK(trainer.moments_held() == next, "the new cut's moments at ", next.offset, "+", next.count,
                     ", the trainer's at ", trainer.moments_held().offset, "+", trainer.moments_held().count);
      const Trainer::Bulk now = trainer.bulk();
      std::copy(part.m.begin(), part.m.end(), now.m.begin());
      std::copy(part.v.begin(), part.v.end(), now.v.begin());
    }
  }
  // The source restores too: a failed step may have moved its data position past its last completed step.
  trainer.restore_meta(meta, source);
  trainer.set_torn_state(false);
  report.step = trainer.state().step;
  // Sharded, the weights this member did not hold read as zero before: it changed when its step did.
  report.changed =
      was_torn || (sharded ? own_step != report.step : hash64(std::span<const float>(trainer.bulk().params)) != before);
  return report;
}

}  // namespace meridian
