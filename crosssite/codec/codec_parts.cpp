#include "crosssite/codec/codec_parts.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>

#include "core/model/shard_map.hpp"
#include "core/util/error.hpp"
#include "crosssite/codec/codec.hpp"
#include "crosssite/codec/codec_impl.hpp"

namespace meridian {
namespace {

// Far above any model's part (2^40 values: 4 TB of fp32), and low enough that no codec's size
// arithmetic overflows: a header claiming more is refused before any size is computed from it.
constexpr std::uint64_t kMaxValues = std::uint64_t{1} << 40;

struct Layout {
  CodecOptions options;
  std::size_t n = 0;
};

// The options and count a message's header names, once its size agrees with them. The header's
// first 8 bytes are compared with what encode() writes for those options, so a kind, format
// version, block or keep this build would not write is refused by the same rules as decode's.
Layout read_layout(std::span<const std::byte> bytes, const std::string& what) {
  if (bytes.size() < kCodecHeaderBytes)
    throw make_error(ErrorKind::Peer, what, ": ", bytes.size(), " bytes, shorter than the codec's header");
  std::uint8_t kind = 0;
  std::uint16_t keep = 0;
  std::uint32_t block = 0;
  std::uint64_t n = 0;
  std::memcpy(&kind, bytes.data(), 1);
  std::memcpy(&keep, bytes.data() + 2, 2);
  std::memcpy(&block, bytes.data() + 4, 4);
  std::memcpy(&n, bytes.data() + 8, 8);
  if (kind > static_cast<std::uint8_t>(CodecKind::Sparse))
    throw make_error(ErrorKind::Peer, what, ": unknown codec id ", int{kind});
  if (n > kMaxValues) throw make_error(ErrorKind::Peer, what, ": claims ", n, " values, more than ", kMaxValues);
  const CodecOptions options{static_cast<CodecKind>(kind), static_cast<int>(block), keep};
  std::byte expected[kCodecHeaderBytes];
  std::size_t size = 0;
  try {
    size = encoded_size(n, options);
    encode({}, options, expected);
  } catch (const Error& e) {
    throw make_error(ErrorKind::Peer, what, ": ", e.what());
  }
  if (std::memcmp(expected, bytes.data(), 8) != 0)
    throw make_error(ErrorKind::Peer, what, ": a header this codec does not write (format version ",
                     static_cast<int>(bytes[1]), ")");
  if (bytes.size() != size)
    throw make_error(ErrorKind::Peer, what, ": ", bytes.size(), " bytes for ", n, " values of ",
                     to_string(options.kind), ", expected ", size);
  return {options, n};
}

// The payload's regions, each in value order: how many of a region's bytes the first m values
// take, m at a block boundary or the end.
// At most two regions (scales and values); no allocation: a delta's digest asks for them per unit.
struct Regions {
  std::array<std::size_t, 2> end{};
  std::size_t count = 0;
  std::size_t size() const { return count; }
  std::size_t operator[](std::size_t r) const { return end[r]; }
};

Regions region_ends(const CodecOptions& o, std::size_t m) {
  const auto block = static_cast<std::size_t>(o.block);
  switch (o.kind) {
    case CodecKind::Fp32:
      return {{4 * m}, 1};
    case CodecKind::Bf16:
      return {{2 * m}, 1};
    case CodecKind::Int8:
      return {{4 * ((m + block - 1) / block), m}, 2};
    case CodecKind::Int4:
      return {{4 * ((m + block - 1) / block), (m + 1) / 2}, 2};
    case CodecKind::Sparse:
      return {{sparse_size(m, block, static_cast<std::size_t>(o.keep))}, 1};
  }
  return {};
}

// Where a part may begin or end: a block boundary (int4: also even), or the end of the values.
bool at_boundary(const CodecOptions& o, std::size_t at) {
  switch (o.kind) {
    case CodecKind::Fp32: return true;
    case CodecKind::Bf16: return true;
    default: return at % static_cast<std::size_t>(o.block) == 0;
  }
}

void write_header(const CodecOptions& o, std::size_t n, std::byte* out) {
  encode({}, o, std::span<std::byte>(out, kCodecHeaderBytes));
  const std::uint64_t count = n;
  std::memcpy(out + 8, &count, 8);
}

}  // namespace

std::vector<std::byte> join_encoded(std::span<const std::vector<std::byte>> parts) {
  MERIDIAN_CHECK(!parts.empty(), "join_encoded of no parts");
  std::vector<Layout> layouts;
  std::size_t n = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string what = "encoded part " + std::to_string(i) + " of " + std::to_string(parts.size());
    layouts.push_back(read_layout(parts[i], what));
    const CodecOptions& o = layouts.back().options;
    const CodecOptions& first = layouts.front().options;
    if (o.kind != first.kind || o.block != first.block || o.keep != first.keep)
      throw make_error(ErrorKind::Peer, what, ": coded as ", to_string(o.kind), " block ", o.block, " keep ", o.keep,
                       ", part 0 as ", to_string(first.kind), " block ", first.block, " keep ", first.keep);
    n += layouts.back().n;
    if (i + 1 < parts.size() && !at_boundary(o, layouts.back().n))
      throw make_error(ErrorKind::Peer, what, ": ", layouts.back().n, " values, not a whole number of ", o.block,
                       "-value blocks");
  }
  const CodecOptions& o = layouts.front().options;
  std::vector<std::byte> whole(encoded_size(n, o));
  write_header(o, n, whole.data());
  std::byte* out = whole.data() + kCodecHeaderBytes;
  const std::size_t regions = region_ends(o, 0).size();
  for (std::size_t r = 0; r < regions; ++r)
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const auto ends = region_ends(o, layouts[i].n);
      std::size_t begin = kCodecHeaderBytes;
      for (std::size_t before = 0; before < r; ++before) begin += ends[before];
      std::memcpy(out, parts[i].data() + begin, ends[r]);
      out += ends[r];
    }
  MERIDIAN_CHECK(out == whole.data() + whole.size(), "joined ", out - whole.data(), " of ", whole.size(), " bytes");
  return whole;
}

namespace {

// Values [offset, end) of a message of `layout` encoded alone: their header (written into
// `header`), then their share of each of the message's regions, views into `whole`.
EncodedUnits::Pieces part_pieces(std::span<const std::byte> whole, const Layout& layout, std::size_t offset,
                                 std::size_t end, std::span<std::byte> header) {
  const CodecOptions& o = layout.options;
  MERIDIAN_CHECK(offset <= end && end <= layout.n && at_boundary(o, offset) && (end == layout.n || at_boundary(o, end)),
                 "part [", offset, ", ", end, ") of ", layout.n, " values coded in blocks of ", o.block);
  write_header(o, end - offset, header.data());
  EncodedUnits::Pieces pieces;
  pieces.at[pieces.count++] = header;
  const auto all = region_ends(o, layout.n), before = region_ends(o, offset), through = region_ends(o, end);
  std::size_t region_begin = kCodecHeaderBytes;
  for (std::size_t r = 0; r < all.size(); ++r) {
    pieces.at[pieces.count++] = whole.subspan(region_begin + before[r], through[r] - before[r]);
    region_begin += all[r];
  }
  return pieces;
}

}  // namespace

std::vector<std::byte> encoded_part(std::span<const std::byte> whole, std::size_t offset, std::size_t count) {
  const Layout layout = read_layout(whole, "an encoded delta");
  std::vector<std::byte> part(encoded_size(count, layout.options));
  std::byte* out = part.data();
  // Named: all() is a view into it, which a temporary would not outlive.
  const auto pieces = part_pieces(whole, layout, offset, offset + count, std::span(out, kCodecHeaderBytes));
  for (const auto piece : pieces.all()) {
    if (piece.data() != out) std::memcpy(out, piece.data(), piece.size());
    out += piece.size();
  }
  MERIDIAN_CHECK(out == part.data() + part.size(), "cut ", out - part.data(), " of ", part.size(), " bytes");
  return part;
}

std::size_t part_unit(const CodecOptions& codec) {
  const bool blocks = codec.kind != CodecKind::Fp32 && codec.kind != CodecKind::Bf16;
  return blocks ? std::lcm(kShardUnit, static_cast<std::size_t>(codec.block)) : kShardUnit;
}

EncodedUnits::EncodedUnits(std::span<const std::byte> encoded) : encoded_(encoded) {
  const Layout layout = read_layout(encoded, "an encoded delta");
  options_ = layout.options;
  values_ = layout.n;
  unit_ = part_unit(options_);
}

EncodedUnits::Pieces EncodedUnits::unit(std::size_t u, Header& header) const {
  MERIDIAN_CHECK(u < count(), "unit ", u, " of ", count());
  const std::size_t offset = u * unit_;
  return part_pieces(encoded_, {options_, values_}, offset, std::min(values_, offset + unit_), header);
}

std::size_t encoded_count(std::span<const std::byte> whole) { return read_layout(whole, "an encoded delta").n; }

std::size_t encoded_size_as(std::span<const std::byte> encoded, std::size_t values) {
  return encoded_size(values, read_layout(encoded, "an encoded delta").options);
}

void decode_range(std::span<const std::byte> whole, std::size_t offset, std::span<float> out) {
  const Layout layout = read_layout(whole, "an encoded delta");
  const std::size_t end = offset + out.size();
  MERIDIAN_CHECK(offset <= end && end <= layout.n, "values [", offset, ", ", end, ") of ", layout.n);
  if (out.empty()) return;
  // The blocks that hold the range: fp32 and bf16 code each value alone.
  const bool blocks = !at_boundary(layout.options, 1);
  const auto block = blocks ? static_cast<std::size_t>(layout.options.block) : 1;
  const std::size_t first = offset / block * block, last = std::min(layout.n, (end + block - 1) / block * block);
  if (first == offset && last == end) return decode(encoded_part(whole, first, last - first), out);
  std::vector<float> held(last - first);
  decode(encoded_part(whole, first, last - first), held);
  std::copy(held.begin() + static_cast<std::ptrdiff_t>(offset - first),
            held.begin() + static_cast<std::ptrdiff_t>(end - first), out.begin());
}

}  // namespace meridian
