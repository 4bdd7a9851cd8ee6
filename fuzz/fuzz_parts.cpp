// A delta's encoded parts as a site's replicas hand them to each other under a sharded outer state
// (crosssite/codec/codec_parts.hpp): the first byte picks 1 to 4 parts, each a piece (a 2-byte
// length in front), then a range. Promises checked: join_encoded refuses bad parts with Error only;
// what it joins is one encoding of the parts' values together (its size is encoded_size of their
// count, and it decodes as a whole when its values are finite), and cuts back into the very parts;
// parts cut on units hash to the whole's digest; a range of it decodes to the whole decode's values; a range of a part
// as it came (a commit's delta a replica takes its part's mean of) decodes or is refused with Error only.
#include "crosssite/codec/codec.hpp"
#include "crosssite/codec/codec_parts.hpp"
#include "crosssite/codec/delta_digest.hpp"
#include "fuzz/fuzz_common.hpp"

int meridian_fuzz_parts(const std::uint8_t* data, std::size_t size) {
  using namespace meridian;
  meridian::fuzz::Input in(data, size);
  const int count = 1 + in.take<std::uint8_t>() % 4;
  std::vector<std::vector<std::byte>> parts;
  for (int i = 0; i < count; ++i) {
    const auto piece = in.piece();
    parts.emplace_back(piece.begin(), piece.end());
  }
  const auto a = in.take<std::uint32_t>(), b = in.take<std::uint32_t>();
  const auto range_of = [&](std::uint64_t n) {
    const std::uint64_t offset = a % (n + 1);
    return std::pair<std::uint64_t, std::uint64_t>{offset, std::min<std::uint64_t>(b % (n - offset + 1), 1 << 16)};
  };
  try {
    const auto [offset, count] = range_of(encoded_count(parts[0]));
    std::vector<float> values(count);
    decode_range(parts[0], offset, values);
  } catch (const Error&) {
  }
  std::vector<std::byte> joined;
  try {
    joined = join_encoded(parts);
  } catch (const Error&) {
    return 0;
  }
  std::vector<std::uint64_t> counts;
  std::uint64_t n = 0;
  for (const auto& p : parts) {
    std::uint64_t c = 0;
    std::memcpy(&c, p.data() + 8, sizeof c);
    counts.push_back(c);
    n += c;
  }
  std::uint64_t joined_n = 0;
  std::memcpy(&joined_n, joined.data() + 8, sizeof joined_n);
  MERIDIAN_FUZZ_EXPECT(joined_n == n, "joined ", joined_n, " values of parts of ", n);
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    MERIDIAN_FUZZ_EXPECT(encoded_part(joined, offset, counts[i]) == parts[i], "part ", i, " cut back otherwise");
    offset += counts[i];
  }
  // Parts cut on units (all but the last a whole number of them) hash alone to the whole's digest.
  const std::size_t unit = EncodedUnits(joined).values_per_unit();
  bool on_units = true;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) on_units = on_units && counts[i] % unit == 0;
  if (on_units && n <= (std::uint64_t{1} << 22)) {
    std::vector<Digest> units;
    for (const auto& p : parts) {
      const auto mine = unit_digests(p);
      units.insert(units.end(), mine.begin(), mine.end());
    }
    MERIDIAN_FUZZ_EXPECT(
        delta_digest(std::span<const Digest>(units)) == delta_digest(std::span<const std::byte>(joined)),
        "parts cut on units hash otherwise than their whole");
  }
  if (n > (std::uint64_t{1} << 22)) return 0;  // sparse blocks of 2^16 values in a few bytes: not decoded
  std::vector<float> y(n);
  try {
    decode(joined, y);
  } catch (const Error&) {
    // A part's values may be non-finite (fp32, bf16) or its scales bad: refused as the parts would be.
    return 0;
  }
  const auto [from, taken] = range_of(n);
  std::vector<float> range(taken);
  decode_range(joined, from, range);
  MERIDIAN_FUZZ_EXPECT(taken == 0 || std::memcmp(range.data(), y.data() + from, taken * sizeof(float)) == 0, "values [",
                       from, ", ", from + taken, ") decode otherwise than in the whole");
  return 0;
}

MERIDIAN_FUZZ_TARGET(parts)
