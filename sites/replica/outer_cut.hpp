#pragma once
// A sharded outer state ([parallel] shard_outer) cut anew for a group that (re)formed: every member
// says what it holds (version, part, mirror), all choose the same sources (choose_outer_sources:
// the newest version the parts and mirrors cover whole), and each keeps its new part of the joined
// records and a mirror of the next rank's. One replica's death loses nothing: its part comes from
// the mirror its predecessor kept. A group that holds its parts already moves nothing; one whose
// members all hold the whole state (the first join) cuts without a transfer. Otherwise each chosen
// source sends every member what falls in its new part and mirror, one source after another: no
// member holds the whole state's records (OuterCut::bytes: about 2/M of them).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/model/shard_map.hpp"
#include "crosssite/outer/outer_state.hpp"
#include "intrasite/comm/communicator.hpp"

namespace meridian {

struct OuterCut {
  std::int64_t version = 0;
  int sources = 0;           // parts put together
  int mirrors = 0;           // ... of them, mirrors standing in for a part no member held
  bool moved = false;        // whether any records travelled
  bool older = false;        // the newest version's parts had a hole: an older whole state, in-flight round dropped
  std::size_t bytes = 0;     // records received here
};

// Every member of `group` calls it together. `weights`: the member's working weights, whole
// (the in-flight round's progress is dropped from them when an older state is taken).
// `from_owners`: the chosen records travel even when every member holds its cut already (a
// mirror found stale is replaced so). `fresh`: this member never began a round (version 0, no
// step taken: `weights` are the job's initial ones); when every member is, each cuts its part and
// mirror from its weights, nothing sent (OuterCut::sources 0), whatever parts they held. Error(Data)
// when no version is whole among the members (a part and its mirror died together, and no member
// restarted from a checkpoint).
OuterCut cut_outer_state(Communicator& group, OuterState& state, const ShardMap& map, std::span<float> weights,
                         bool from_owners = false, bool fresh = false);

// The ranges of the model's values member `rank` holds under `map`: its part, and its mirror of
// the next rank's when the group has several.
std::vector<ShardRange> held_ranges(const ShardMap& map, int rank);

}  // namespace meridian
