#include "crosssite/outer/merged_deltas.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/util/error.hpp"
#include "crosssite/codec/codec_parts.hpp"
#include "crosssite/outer/delta_mean.hpp"

namespace meridian {
namespace {

// Values decoded at a time per delta: bounds what a mean of a whole part holds besides its output.
constexpr std::size_t kPiece = std::size_t{1} << 16;

template <class T>
void put(std::vector<std::byte>& out, const T& value) {
  const auto* p = reinterpret_cast<const std::byte*>(&value);
  out.insert(out.end(), p, p + sizeof(T));
}

template <class T>
T take(std::span<const std::byte>& in) {
  MERIDIAN_CHECK(in.size() >= sizeof(T), "a merged-deltas pack ends ", in.size(), " bytes short of a field of ",
                 sizeof(T));
  T value;
  std::memcpy(&value, in.data(), sizeof(T));
  in = in.subspan(sizeof(T));
  return value;
}

}  // namespace

void merged_mean(std::span<const std::span<const std::byte>> encoded, std::span<const double> weights, double share,
                 std::size_t values, std::size_t offset, std::span<float> out) {
  MERIDIAN_CHECK(offset <= values && out.size() <= values - offset, "values [", offset, ", ", offset + out.size(),
                 ") of ", values);
  for (std::size_t i = 0; i < encoded.size(); ++i)
    if (const std::size_t n = encoded_count(encoded[i]); n != values)
      throw make_error(ErrorKind::Peer, "merged delta ", i, " of ", encoded.size(), " holds ", n, " values, the model ",
                       values);
  std::vector<std::vector<float>> decoded(encoded.size());
  std::vector<std::span<const float>> views(encoded.size());
  for (std::size_t at = 0; at < out.size(); at += kPiece) {
    const std::size_t count = std::min(kPiece, out.size() - at);
    for (std::size_t i = 0; i < encoded.size(); ++i) {
      decoded[i].resize(count);
      decode_range(encoded[i], offset + at, decoded[i]);
      views[i] = decoded[i];
    }
    const auto piece = out.subspan(at, count);
    weighted_mean(views, weights, piece);
    // A late delta, or a missing site, also counts in absolute terms (commit_share).
    if (share < 1.0)
      for (auto& x : piece) x = static_cast<float>(share * static_cast<double>(x));
  }
}

void MergedDeltas::fill(std::size_t i, std::vector<std::byte> encoding) {
  MERIDIAN_CHECK(i < refs.size() && !refs[i].empty(), "delta ", i, " of ", encoded.size(),
                 " is no delta held in parts");
  encoded[i] = std::move(encoding);
  refs[i].clear();
  if (!filled()) return;
  refs.clear();
  sources.clear();
}

bool MergedDeltas::filled() const {
  return std::all_of(refs.begin(), refs.end(), [](const std::string& r) { return r.empty(); });
}

void MergedDeltas::mean(std::size_t offset, std::span<float> out) const {
  MERIDIAN_CHECK(filled(), "a mean of deltas held in parts not filled in");
  if (out.empty()) return;
  std::vector<std::span<const std::byte>> views(encoded.begin(), encoded.end());
  if (held.empty()) return merged_mean(views, weights, share, values, offset, out);
  std::size_t total = 0;
  for (const ShardRange& r : held) total += r.count;
  std::size_t at = 0;  // where range r begins in each encoding's values
  for (const ShardRange& r : held) {
    if (offset >= r.offset && offset < r.end() && out.size() <= r.end() - offset)
      return merged_mean(views, weights, share, total, at + (offset - r.offset), out);
    at += r.count;
  }
  MERIDIAN_CHECK(false, "values [", offset, ", ", offset + out.size(), ") are not inside one of the ", held.size(),
                 " ranges held");
}

MergedDeltas MergedDeltas::cut(std::vector<ShardRange> ranges) const {
  MERIDIAN_CHECK(held.empty(), "a cut of deltas cut already");
  std::erase_if(ranges, [](const ShardRange& r) { return r.count == 0; });
  std::sort(ranges.begin(), ranges.end(), [](const ShardRange& a, const ShardRange& b) { return a.offset < b.offset; });
  std::vector<ShardRange> joined;
  for (const ShardRange& r : ranges) {
    MERIDIAN_CHECK(r.end() <= values, "range ", r.offset, "+", r.count, " of ", values, " values");
    if (!joined.empty() && r.offset <= joined.back().end())
      joined.back().count = std::max(joined.back().end(), r.end()) - joined.back().offset;
    else
      joined.push_back(r);
  }
  MergedDeltas out{{}, weights, share, values, joined, refs, sources};
  if (joined.size() == 1 && joined[0].count == values) out.held.clear();  // all of it: the deltas as they are
  if (joined.empty()) out.held = {ShardRange{0, 0}};                      // nothing: no bytes
  for (std::size_t i = 0; i < encoded.size(); ++i) {
    const auto& whole = encoded[i];
    if (i < refs.size() && !refs[i].empty()) {  // its replicas' parts: each fills in its own
      out.encoded.emplace_back();
      continue;
    }
    if (out.held.empty() || joined.empty()) {
      out.encoded.push_back(joined.empty() ? std::vector<std::byte>{} : whole);
      continue;
    }
    std::vector<std::vector<std::byte>> parts;
    for (const ShardRange& r : joined) parts.push_back(encoded_part(whole, r.offset, r.count));
    out.encoded.push_back(parts.size() == 1 ? std::move(parts.front()) : join_encoded(parts));
  }
  return out;
}

std::vector<std::byte> MergedDeltas::pack() const {
  MERIDIAN_CHECK(encoded.size() == weights.size(), encoded.size(), " deltas, ", weights.size(), " weights");
  std::vector<std::byte> out;
  put(out, std::uint64_t{encoded.size()});
  put(out, share);
  put(out, std::uint64_t{values});
  put(out, std::uint64_t{held.size()});
  for (const ShardRange& r : held) {
    put(out, std::uint64_t{r.offset});
    put(out, std::uint64_t{r.count});
  }
  MERIDIAN_CHECK(refs.empty() || refs.size() == encoded.size(), encoded.size(), " deltas, ", refs.size(), " refs");
  MERIDIAN_CHECK(sources.size() == refs.size(), refs.size(), " refs, ", sources.size(), " sources");
  put(out, std::uint64_t{refs.size()});
  for (std::size_t i = 0; i < encoded.size(); ++i) {
    put(out, weights[i]);
    put(out, std::uint64_t{encoded[i].size()});
    out.insert(out.end(), encoded[i].begin(), encoded[i].end());
    if (refs.empty()) continue;
    for (const std::string* text : {&refs[i], &sources[i].first}) {
      put(out, std::uint64_t{text->size()});
      const auto* chars = reinterpret_cast<const std::byte*>(text->data());
      out.insert(out.end(), chars, chars + text->size());
    }
    put(out, sources[i].second);
  }
  return out;
}

MergedDeltas MergedDeltas::unpack(std::span<const std::byte> bytes) {
  MergedDeltas m;
  const auto count = take<std::uint64_t>(bytes);
  m.share = take<double>(bytes);
  m.values = take<std::uint64_t>(bytes);
  const auto ranges = take<std::uint64_t>(bytes);
  for (std::uint64_t i = 0; i < ranges; ++i) {
    const auto offset = take<std::uint64_t>(bytes);
    m.held.push_back({offset, take<std::uint64_t>(bytes)});
  }
  const auto refs = take<std::uint64_t>(bytes);
  MERIDIAN_CHECK(refs == 0 || refs == count, count, " deltas, ", refs, " refs");
  const auto bytes_of = [&](std::uint64_t i) {
    const auto size = take<std::uint64_t>(bytes);
    MERIDIAN_CHECK(size <= bytes.size(), "merged delta ", i, " of ", count, ": ", size, " bytes, ", bytes.size(),
                   " left");
    const auto read = bytes.first(size);
    bytes = bytes.subspan(size);
    return read;
  };
  for (std::uint64_t i = 0; i < count; ++i) {
    m.weights.push_back(take<double>(bytes));
    const auto encoding = bytes_of(i);
    m.encoded.emplace_back(encoding.begin(), encoding.end());
    if (refs == 0) continue;
    const auto ref = bytes_of(i);
    m.refs.emplace_back(reinterpret_cast<const char*>(ref.data()), ref.size());
    const auto site = bytes_of(i);
    m.sources.emplace_back(std::string(reinterpret_cast<const char*>(site.data()), site.size()),
                           take<std::int64_t>(bytes));
  }
  MERIDIAN_CHECK(bytes.empty(), "a merged-deltas pack with ", bytes.size(), " bytes past its ", count, " deltas");
  return m;
}

}  // namespace meridian
