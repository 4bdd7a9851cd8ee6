#pragma once
// The records of a sharded site's outer state (OuterState with a part, [parallel] shard_outer),
// between the parts its replicas hold and the whole model's: what a checkpoint writes, a peer's
// snapshot carries and a re-formed group cuts anew. Every "outer.*" record that holds a value per
// parameter (weights, round start, momentum and its delay buffer, residual) is cut or joined in
// parameter order; the others (version, step counts) are the same in every part.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/checkpoint/checkpoint.hpp"
#include "core/checkpoint/sliced_records.hpp"
#include "core/model/shard_map.hpp"

namespace meridian {

// `whole`'s outer records with their values of `part` only. Error(Checkpoint) when a per-value
// record does not hold the model's values (as many as "outer.global"), or `part` is not inside them.
Checkpoint cut_outer_records(const Checkpoint& whole, ShardRange part);
// The same with the model's values given (records that may lack "outer.global": an optimizer's).
Checkpoint cut_outer_records(const Checkpoint& whole, ShardRange part, std::size_t values);

// The whole model's records from the parts' (OuterState::save of each, "outer.part" naming its
// part, a whole state's none), in any order. Error(Peer) when they do not cover the model exactly once, disagree on the
// model's size or on a record that is not per value (two versions), or a part's record does not
// hold its part's values: parts come from other replicas, and are checked as a peer's bytes.
Checkpoint join_outer_parts(std::span<const Checkpoint> parts);

// The outer records' kinds as sliced_records.hpp names them: every "outer.*" record, those that
// hold a value per parameter apart.
const SliceKinds& outer_record_kinds();
// `records` (OuterState::save of a state or a part) with the values of `range` alone, labelled as a
// part's records are ("outer.part"): what a member of a re-formed group gets from a source of the
// part it keeps. InvariantError when `range` is not inside the part they hold.
Checkpoint outer_records_of(const Checkpoint& records, ShardRange range);
// The part `records` hold as the slice RangeRecords takes (its records: `records`). Error(Peer)
// naming `source` when "outer.part" is malformed.
RecordSlice outer_slice_of(const Checkpoint& records, std::string source);
// The part records hold and the model's size.
std::pair<ShardRange, std::size_t> outer_records_part(const Checkpoint& records);

// A part's records (OuterState::save of a part) as the slice a checkpoint's part file carries
// (core/checkpoint/sliced_records.hpp): read_checkpoint joins the parts' slices to the records
// join_outer_parts gives, with no replica holding the whole.
void put_outer_slice(Checkpoint& part_file, const Checkpoint& part);

// What a replica of a re-formed group holds of the outer state: its version, its part (the whole
// model's for a whole state) and its mirror's part, if any, and its round's moves at that version
// (OuterState::moves).
struct HeldOuter {
  std::int64_t version = 0;
  ShardRange part;
  std::optional<ShardRange> mirror;
  std::size_t model = 0;
  std::int64_t moves = 0;
};
// One source of the state a group goes on from: a member's own records, or its mirror's.
struct OuterSource {
  int member = 0;
  bool mirror = false;
  bool operator==(const OuterSource&) const = default;
};
struct OuterSources {
  std::int64_t version = 0;
  std::vector<OuterSource> sources;  // in parameter order, covering the model once
  bool newest = true;                // false: the newest state's parts do not cover the model
  std::int64_t moves = 0;            // the chosen state's round moves
};
// Whose records make the whole state: the newest state whose parts cover the model (own parts
// before mirrors, fewest sources), else the newest older one that does (a restarted replica's
// whole state from its checkpoint); nothing when none does. A state is newer by its version, then
// by its round's moves: a replica restarted from a checkpoint of the version the others hold
// holds an older round, and its records never stand in for theirs. Pure: every member of the
// group computes the same from the same list.
std::optional<OuterSources> choose_outer_sources(std::span<const HeldOuter> held);

// What OuterState::snapshot() gives, from the whole model's records: the weights, the version and
// the optimizer's state, not the site's own round (its start, residual and moves).
std::vector<std::byte> outer_snapshot(const Checkpoint& whole);

}  // namespace meridian
