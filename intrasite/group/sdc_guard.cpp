#include "intrasite/group/sdc_guard.hpp"

#include <algorithm>
#include <map>

#include "core/checkpoint/checkpoint.hpp"
#include "core/util/error.hpp"

namespace meridian {

SdcVerdict judge_hashes(const std::vector<std::uint64_t>& hashes) {
  SdcVerdict v;
  std::map<std::uint64_t, int> votes;
  for (auto h : hashes) ++votes[h];
  if (votes.size() <= 1) return v;
  v.agree = false;
  for (const auto& [h, n] : votes) {
    if (2 * n <= static_cast<int>(hashes.size())) continue;  // strict majority only
    for (int r = 0; r < static_cast<int>(hashes.size()); ++r) {
      if (hashes[r] != h) v.odd_ranks.push_back(r);
    }
    for (int r = 0; r < static_cast<int>(hashes.size()); ++r) {
      if (hashes[r] == h) {
        v.source_rank = r;
        break;
      }
    }
    return v;
  }
  v.rollback = true;
  return v;
}

namespace {

// The majority's state with this replica's part of the moments, under a shard.
void keep_own_moments(Checkpoint& majority, const Checkpoint& own) {
  for (const char* record : {"adamw.m", "adamw.v", "adamw.shard"}) {
    const auto bytes = own.get(record);
    majority.put(record, {bytes.begin(), bytes.end()});
  }
}

}  // namespace

SdcVerdict judge_part_copies(const std::vector<std::uint64_t>& parts, const std::vector<std::uint64_t>& mirrors) {
  MERIDIAN_CHECK(parts.size() == mirrors.size() && !parts.empty(), "parts ", parts.size(), " mirrors ", mirrors.size());
  SdcVerdict v;
  for (std::size_t r = 0; r < parts.size(); ++r)
    if (mirrors[r] != parts[(r + 1) % parts.size()]) v.agree = false;
  v.rollback = !v.agree;  // two copies of a part: no majority to tell the good one
  return v;
}

SdcOutcome SdcGuard::check(Communicator& comm, Trainer& trainer) {
  SdcOutcome out;
  const std::int64_t step = trainer.state().step;
  if (trainer.shards_weights() &&
      (!trainer.weights_sharded() || (trainer.mirror_step() == step && trainer.own_part_step() == step))) {
    const auto [part, mirror] = trainer.part_hashes();
    out.hashes = all_hashes(comm, part);
    out.mirror_hashes = all_hashes(comm, mirror);
    out.verdict = judge_part_copies(out.hashes, out.mirror_hashes);
  } else {
    out.hashes = all_hashes(comm, trainer.params_hash());
    out.verdict = judge_hashes(out.hashes);
  }
  if (out.verdict.agree) {
    agreed_state_ = encode_checkpoint(trainer.snapshot_held());
    agreed_step_ = trainer.state().step;
  } else if (out.verdict.rollback) {
    if (!agreed_step_)
      throw make_error(ErrorKind::Peer, "replicas disagree on their weights at step ", trainer.state().step,
                       " and there is no earlier agreed state to roll back to");
    trainer.restore(decode_checkpoint(agreed_state_, "the last agreed state"), "the last agreed state");
  } else {
    // Everyone takes part in the broadcast; only the odd ones out take the majority's state.
    std::vector<std::byte> bytes;
    if (comm.rank() == out.verdict.source_rank) bytes = encode_checkpoint(trainer.snapshot());
    std::uint64_t size = bytes.size();
    comm.broadcast(std::as_writable_bytes(std::span<std::uint64_t>(&size, 1)), out.verdict.source_rank);
    bytes.resize(size);
    comm.broadcast(bytes, out.verdict.source_rank);
    const bool odd = std::find(out.verdict.odd_ranks.begin(), out.verdict.odd_ranks.end(), comm.rank()) !=
                     out.verdict.odd_ranks.end();
    if (odd) {
      Checkpoint majority = decode_checkpoint(bytes, "majority state");
      if (trainer.moments_held().count != trainer.param_count()) keep_own_moments(majority, trainer.snapshot());
      trainer.restore(majority, "majority state");
    }
    agreed_state_ = std::move(bytes);
    agreed_step_ = trainer.state().step;
  }
  out.step = trainer.state().step;
  return out;
}

}  // namespace meridian
