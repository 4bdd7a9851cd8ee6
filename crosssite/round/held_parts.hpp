#pragma once
// A peer's delta that this site's replicas hold in parts, none of them whole (a split exchange into
// a site whose outer state is sharded: transport/link/striped_link.hpp). Each replica reports its
// part's unit digests and tally; the leader judges the delta by the reports put together: its
// digest from the units' (crosssite/codec/delta_digest.hpp), its norm from the tallies
// (DeltaScreen::Tally::join), as if it held the bytes.
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/util/digest.hpp"
#include "crosssite/round/delta_screen.hpp"

namespace meridian {

// What a replica says of the part it keeps.
struct PartReport {
  std::vector<Digest> units;  // unit_digests of its encoding
  DeltaScreen::Tally tally;   // its values, from the part's first on
};

// Bytes between replicas of one site (one binary): InvariantError on bytes that are no report.
std::vector<std::byte> encode_part_report(const PartReport& report);
PartReport decode_part_report(std::span<const std::byte> bytes);

// How a site names a peer's transfer (from its link address) held in parts, leader and replicas alike.
inline std::string parts_ref(const std::string& owner, std::uint64_t transfer_id) {
  return owner + "#" + std::to_string(transfer_id);
}

// What the leader holds of the delta; `ref` names it to the replicas that keep its parts.
struct HeldInParts {
  std::vector<Digest> units;
  DeltaScreen::Tally tally;
  std::string ref;
};

// The reports of every part, in part order, put together; nothing when they do not follow one
// another (parts of different cuts: the group changed meanwhile).
std::optional<HeldInParts> held_in_parts(std::span<const std::vector<std::byte>> reports, std::string ref);

}  // namespace meridian
