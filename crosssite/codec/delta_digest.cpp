#include "crosssite/codec/delta_digest.hpp"

#include "crosssite/codec/codec_parts.hpp"

namespace meridian {

std::vector<Digest> unit_digests(std::span<const std::byte> encoded) {
  const EncodedUnits units(encoded);
  std::vector<Digest> out(units.count());
  // Each unit hashes alone: the threads share the delta, one unit at a time.
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t u = 0; u < static_cast<std::ptrdiff_t>(out.size()); ++u) {
    EncodedUnits::Header header;
    const auto pieces = units.unit(static_cast<std::size_t>(u), header);
    out[static_cast<std::size_t>(u)] = sha256(pieces.all());
  }
  return out;
}

Digest delta_digest(std::span<const Digest> units) { return sha256(std::as_bytes(units)); }

Digest delta_digest(std::span<const std::byte> encoded) {
  const auto units = unit_digests(encoded);
  return delta_digest(std::span<const Digest>(units));
}

}  // namespace meridian
