#include "sites/replica/outer_cut.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/checkpoint/checkpoint.hpp"
#include "core/checkpoint/sliced_records.hpp"
#include "core/util/error.hpp"
#include "crosssite/outer/outer_parts.hpp"
#include "sites/replica/group_parts.hpp"

namespace meridian {
namespace {

// What a member holds, as it travels: version, part, mirror (count 0: none), the model's size,
// its round's moves.
struct Said {
  std::int64_t version;
  std::uint64_t offset, count, mirror_offset, mirror_count, model, fresh;
  std::int64_t moves;
};

std::optional<ShardRange> mirror_of(const ShardMap& map, int rank) {
  if (map.ranks() < 2) return std::nullopt;
  return map.part((rank + 1) % map.ranks());
}

struct Members {
  std::vector<HeldOuter> held;
  bool fresh = true;  // every member's
};

Members what_members_hold(GroupParts& parts, const OuterState& state, bool fresh) {
  const auto mirror = state.mirror_part();
  const Said mine{
      state.version(), state.part().offset, state.part().count, mirror ? mirror->offset : 0, mirror ? mirror->count : 0,
      state.size(),    fresh ? 1u : 0u,     state.moves()};
  Members out;
  for (const auto& bytes : parts.all_gather(std::as_bytes(std::span(&mine, 1)))) {
    Said s{};
    MERIDIAN_CHECK(bytes.size() == sizeof s, "a member said ", bytes.size(), " bytes of what it holds");
    std::memcpy(&s, bytes.data(), sizeof s);
    out.held.push_back({s.version,
                        {s.offset, s.count},
                        s.mirror_count > 0 ? std::optional(ShardRange{s.mirror_offset, s.mirror_count}) : std::nullopt,
                        s.model,
                        s.moves});
    out.fresh = out.fresh && s.fresh == 1;
  }
  return out;
}

// Whether every member holds this cut's part and mirror (of whatever version).
bool holds_cut(const std::vector<HeldOuter>& held, const ShardMap& map) {
  for (std::size_t m = 0; m < held.size(); ++m)
    if (held[m].part != map.part(static_cast<int>(m)) || held[m].mirror != mirror_of(map, static_cast<int>(m)))
      return false;
  return true;
}

// Whether every member holds this cut's part (and mirror) of the version chosen, from its own.
bool in_place(const std::vector<HeldOuter>& held, const OuterSources& sources, const ShardMap& map) {
  if (!sources.newest || sources.sources.size() != held.size()) return false;
  for (std::size_t m = 0; m < held.size(); ++m) {
    const int rank = static_cast<int>(m);
    if (sources.sources[m] != OuterSource{rank, false} || held[m].part != map.part(rank) ||
        held[m].mirror != mirror_of(map, rank))
      return false;
  }
  return true;
}

// What of `records` falls in `target` (none: nothing), as the bytes a member gets. An empty
// target (a part of no unit, in a group of more replicas than units) gets the first source's
// records of no value: the records that are not per value, which its state still needs.
std::vector<std::byte> overlap_of(const Checkpoint& records, std::optional<ShardRange> target, bool first_source) {
  const ShardRange held = outer_records_part(records).first;
  if (!target) return {};
  if (target->count == 0)
    return first_source ? encode_checkpoint(outer_records_of(records, {held.offset, 0})) : std::vector<std::byte>{};
  const std::size_t begin = std::max(held.offset, target->offset), end = std::min(held.end(), target->end());
  if (begin >= end) return {};
  return encode_checkpoint(outer_records_of(records, {begin, end - begin}));
}

// Each source's records go from the member that holds them to every member, each getting only
// what falls in its new part and in its new mirror (Communicator::scatter), one source at a time:
// beside its old part and mirror a member holds its new ones and one source's records, never the
// whole state's. The bytes this member received.
std::size_t recut_from_sources(Communicator& group, OuterState& state, const ShardMap& map,
                               const OuterSources& sources) {
  const int rank = group.rank();
  const ShardRange part = map.part(rank);
  const auto mirror = mirror_of(map, rank);
  RangeRecords own(part.offset, part.count, outer_record_kinds(), ErrorKind::Peer);
  std::optional<RangeRecords> mirrored;
  if (mirror) mirrored.emplace(mirror->offset, mirror->count, outer_record_kinds(), ErrorKind::Peer);
  std::size_t received = 0;
  for (const auto& s : sources.sources) {
    std::vector<std::vector<std::byte>> for_parts, for_mirrors;
    if (s.member == rank) {
      Checkpoint records;
      if (s.mirror)
        state.save_mirror(records);
      else
        state.save(records);
      const bool first = &s == &sources.sources.front();
      for (int m = 0; m < group.size(); ++m) {
        for_parts.push_back(overlap_of(records, map.part(m), first));
        for_mirrors.push_back(overlap_of(records, mirror_of(map, m), first));
      }
    }
    const std::string source = "replica " + std::to_string(s.member) + "'s outer " + (s.mirror ? "mirror" : "part");
    for (auto [into, pieces] :
         {std::pair{&own, &for_parts}, std::pair{mirrored ? &*mirrored : nullptr, &for_mirrors}}) {
      const auto piece = group.scatter(*pieces, s.member);
      received += piece.size();
      if (piece.empty()) continue;
      if (!into) throw make_error(ErrorKind::Peer, source, " sent values for a mirror this replica does not keep");
      const Checkpoint records = decode_checkpoint(piece, source);
      into->take(outer_slice_of(records, source));
    }
  }
  const Checkpoint own_records = std::move(own).finish();
  if (!mirrored) {
    state.restore_part(own_records, part);
  } else {
    const Checkpoint mirror_records = std::move(*mirrored).finish();
    state.restore_part(own_records, part, &mirror_records, mirror);
  }
  return received;
}

}  // namespace

std::vector<ShardRange> held_ranges(const ShardMap& map, int rank) {
  std::vector<ShardRange> held = {map.part(rank)};
  if (const auto mirror = mirror_of(map, rank)) held.push_back(*mirror);
  return held;
}

OuterCut cut_outer_state(Communicator& group, OuterState& state, const ShardMap& map, std::span<float> weights,
                         bool from_owners, bool fresh) {
  GroupParts parts(group, map);
  const auto [held, all_fresh] = what_members_hold(parts, state, fresh);
  if (all_fresh && !from_owners) {  // version 0 everywhere, from the initial weights every member holds
    OuterCut cut{0, 0, 0, false, false, 0};
    if (!holds_cut(held, map)) state.start_over(weights, map.part(group.rank()), mirror_of(map, group.rank()));
    return cut;
  }
  const auto sources = choose_outer_sources(held);
  if (!sources)
    throw make_error(ErrorKind::Data, "the ", group.size(), " replicas hold no whole outer state of any version (a "
                     "replica and the one mirroring its part both died, and none restarted from a checkpoint): restart "
                     "the site's replicas, which take the state from the site's newest checkpoint");
  OuterCut cut{sources->version, static_cast<int>(sources->sources.size()), 0, false, !sources->newest, 0};
  for (const auto& s : sources->sources) cut.mirrors += s.mirror ? 1 : 0;
  if (!from_owners && in_place(held, *sources, map)) return cut;
  const int rank = group.rank();
  bool whole_here = true;
  for (const auto& h : held)
    whole_here = whole_here && h.version == sources->version && h.moves == sources->moves && h.part.count == h.model;
  if (whole_here) {  // every member holds the same whole state: each cuts its own
    state.cut(map.part(rank), mirror_of(map, rank));
    return cut;
  }
  cut.bytes = recut_from_sources(group, state, map, *sources);
  cut.moved = true;
  if (cut.older) {
    state.drop_in_flight(weights);
    parts.all_gather(weights);
  }
  return cut;
}

}  // namespace meridian
