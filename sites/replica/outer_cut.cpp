#include "sites/replica/outer_cut.hpp"

#include <cstring>
#include <optional>
#include <vector>

#include "core/checkpoint/checkpoint.hpp"
#include "core/util/error.hpp"
#include "crosssite/outer/outer_parts.hpp"
#include "sites/replica/group_parts.hpp"

namespace meridian {
namespace {

// What a member holds, as it travels: version, part, mirror (count 0: none), the model's size.
struct Said {
  std::int64_t version;
  std::uint64_t offset, count, mirror_offset, mirror_count, model;
};

std::optional<ShardRange> mirror_of(const ShardMap& map, int rank) {
  if (map.ranks() < 2) return std::nullopt;
  return map.part((rank + 1) % map.ranks());
}

std::vector<HeldOuter> what_members_hold(GroupParts& parts, const OuterState& state) {
  const auto mirror = state.mirror_part();
  const Said mine{state.version(),        state.part().offset, state.part().count, mirror ? mirror->offset : 0,
                  mirror ? mirror->count : 0, state.size()};
  std::vector<HeldOuter> held;
  for (const auto& bytes : parts.all_gather(std::as_bytes(std::span(&mine, 1)))) {
    Said s{};
    MERIDIAN_CHECK(bytes.size() == sizeof s, "a member said ", bytes.size(), " bytes of what it holds");
    std::memcpy(&s, bytes.data(), sizeof s);
    held.push_back({s.version, {s.offset, s.count},
                    s.mirror_count > 0 ? std::optional(ShardRange{s.mirror_offset, s.mirror_count}) : std::nullopt,
                    s.model});
  }
  return held;
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

std::vector<std::byte> records_of(const OuterState& state, bool mirror) {
  Checkpoint c;
  if (mirror)
    state.save_mirror(c);
  else
    state.save(c);
  return encode_checkpoint(c);
}

}  // namespace

std::vector<ShardRange> held_ranges(const ShardMap& map, int rank) {
  std::vector<ShardRange> held = {map.part(rank)};
  if (const auto mirror = mirror_of(map, rank)) held.push_back(*mirror);
  return held;
}

OuterCut cut_outer_state(Communicator& group, OuterState& state, const ShardMap& map, std::span<float> weights,
                         bool from_owners) {
  GroupParts parts(group, map);
  const auto held = what_members_hold(parts, state);
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
  for (const auto& h : held) whole_here = whole_here && h.version == sources->version && h.part.count == h.model;
  if (whole_here) {  // every member holds the same whole state: each cuts its own
    state.cut(map.part(rank), mirror_of(map, rank));
    return cut;
  }
  // Each source's records from the member that holds them, to every member.
  bool own = false, mirror = false;
  for (const auto& s : sources->sources)
    if (s.member == rank) (s.mirror ? mirror : own) = true;
  const auto owned = parts.all_gather(own ? records_of(state, false) : std::vector<std::byte>{});
  const auto mirrored = parts.all_gather(mirror ? records_of(state, true) : std::vector<std::byte>{});
  std::vector<Checkpoint> chosen;
  for (const auto& s : sources->sources) {
    const auto& bytes = (s.mirror ? mirrored : owned)[static_cast<std::size_t>(s.member)];
    cut.bytes += bytes.size();
    chosen.push_back(decode_checkpoint(bytes, "replica " + std::to_string(s.member) + "'s outer part"));
  }
  cut.moved = true;
  state.restore(join_outer_parts(chosen), map.part(rank), mirror_of(map, rank));
  if (cut.older) {
    state.drop_in_flight(weights);
    parts.all_gather(weights);
  }
  return cut;
}

}  // namespace meridian
