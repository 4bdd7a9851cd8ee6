#pragma once
// A delta's identity in announcements and commits (core/util/digest.hpp says why SHA-256): the
// SHA-256 of its units' SHA-256s in order, a unit being the encoding of a run of part_unit values
// (codec_parts.hpp), cut as encoded_part cuts it. The digest is a function of the bytes alone, as
// before, and also of any cut on units: the replicas that hold a sharded outer state's parts (whole
// units each) hash theirs alone, and their lists put end to end are the whole's.
#include <cstddef>
#include <span>
#include <vector>

#include "core/util/digest.hpp"

namespace meridian {

// The SHA-256 of each unit of `encoded`, a whole delta or a part of one that begins on a unit.
// Error(Peer) when the bytes are not an encoded delta.
std::vector<Digest> unit_digests(std::span<const std::byte> encoded);

// The digest of a delta whose units hash to `units`, in order.
Digest delta_digest(std::span<const Digest> units);

// unit_digests, then delta_digest. Error(Peer) when the bytes are not an encoded delta.
Digest delta_digest(std::span<const std::byte> encoded);

}  // namespace meridian
