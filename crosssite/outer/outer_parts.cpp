#include "crosssite/outer/outer_parts.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/checkpoint/sliced_records.hpp"
#include "core/util/error.hpp"

namespace meridian {
namespace {

constexpr const char* kPartRecord = "outer.part";

bool per_value(const std::string& name) {
  return name == "outer.global" || name == "outer.start" || name == "outer.residual" ||
         (name.starts_with("outer.momentum") && !name.ends_with(".pending"));
}

bool outer(const std::string& name) { return name.starts_with("outer.") && name != kPartRecord; }

const SliceKinds kOuterKinds{outer, per_value};

}  // namespace

// "outer.part", or the whole of a whole state's.
std::pair<ShardRange, std::size_t> outer_records_part(const Checkpoint& records) {
  if (!records.has(kPartRecord)) {
    const std::size_t n = records.get(std::string("outer.global")).size() / sizeof(float);
    return {{0, n}, n};
  }
  const auto range = records.get_pod<std::uint64_t>(kPartRecord);
  if (range.size() != 3 || range[0] + range[1] > range[2])
    throw make_error(ErrorKind::Checkpoint, "record \"", kPartRecord, "\" is not a part of a model");
  return {{range[0], range[1]}, range[2]};
}

Checkpoint cut_outer_records(const Checkpoint& whole, ShardRange part) {
  return cut_outer_records(whole, part, whole.get(std::string("outer.global")).size() / sizeof(float));
}

Checkpoint cut_outer_records(const Checkpoint& whole, ShardRange part, std::size_t n) {
  if (part.end() > n)
    throw make_error(ErrorKind::Checkpoint, "outer records of ", n, " values cut at ", part.offset, "+", part.count);
  Checkpoint cut;
  for (const auto& name : whole.names()) {
    if (!outer(name)) continue;
    const auto bytes = whole.get(name);
    if (!per_value(name)) {
      cut.put(name, std::vector<std::byte>(bytes.begin(), bytes.end()));
      continue;
    }
    if (bytes.size() != n * sizeof(float))
      throw make_error(ErrorKind::Checkpoint, "record \"", name, "\" holds ", bytes.size() / sizeof(float),
                       " values, the model has ", n);
    const auto first = bytes.begin() + static_cast<std::ptrdiff_t>(part.offset * sizeof(float));
    cut.put(name, std::vector<std::byte>(first, first + static_cast<std::ptrdiff_t>(part.count * sizeof(float))));
  }
  return cut;
}

const SliceKinds& outer_record_kinds() { return kOuterKinds; }

Checkpoint outer_records_of(const Checkpoint& records, ShardRange range) {
  const auto [part, model] = outer_records_part(records);
  MERIDIAN_CHECK(range.offset >= part.offset && range.end() <= part.end(), "values ", range.offset, "+", range.count,
                 " of records of ", part.offset, "+", part.count);
  Checkpoint out = cut_outer_records(records, {range.offset - part.offset, range.count}, part.count);
  out.put_pod<std::uint64_t>(kPartRecord, std::vector<std::uint64_t>{range.offset, range.count, model});
  return out;
}

RecordSlice outer_slice_of(const Checkpoint& records, std::string source) {
  try {
    const auto [range, model] = outer_records_part(records);
    return {range.offset, range.count, model, &records, std::move(source)};
  } catch (const Error& e) {
    throw make_error(ErrorKind::Peer, source, ": ", e.what());
  }
}

Checkpoint join_outer_parts(std::span<const Checkpoint> parts) {
  MERIDIAN_CHECK(!parts.empty(), "no parts to join");
  std::vector<RecordSlice> slices;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    try {
      const auto [range, model] = outer_records_part(parts[i]);
      slices.push_back({range.offset, range.count, model, &parts[i], "outer part " + std::to_string(i)});
    } catch (const Error& e) {
      throw make_error(ErrorKind::Peer, "outer part ", i, ": ", e.what());
    }
  }
  Checkpoint whole;
  join_slices(slices, kOuterKinds, ErrorKind::Peer, whole);
  return whole;
}

void put_outer_slice(Checkpoint& part_file, const Checkpoint& part) {
  const auto [range, model] = outer_records_part(part);
  put_slice(part_file, part, kOuterKinds, range.offset, range.count, model);
}

std::optional<OuterSources> choose_outer_sources(std::span<const HeldOuter> held) {
  using Key = std::pair<std::int64_t, std::int64_t>;  // version, moves
  std::vector<Key> keys;
  for (const auto& h : held) keys.emplace_back(h.version, h.moves);
  std::sort(keys.rbegin(), keys.rend());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  for (const Key& key : keys) {
    OuterSources out{key.first, {}, key == keys.front(), key.second};
    std::size_t covered = 0;
    const std::size_t model = held.front().model;
    const auto of_key = [&](const HeldOuter& h) { return Key{h.version, h.moves} == key && h.model == model; };
    while (covered < model) {
      // At `covered`: the longest part that begins there, a member's own before a mirror.
      std::optional<OuterSource> best;
      std::size_t best_count = 0;
      for (int m = 0; m < static_cast<int>(held.size()); ++m) {
        const HeldOuter& h = held[static_cast<std::size_t>(m)];
        if (of_key(h) && h.part.offset == covered && h.part.count > best_count)
          best = OuterSource{m, false}, best_count = h.part.count;
      }
      for (int m = 0; m < static_cast<int>(held.size()) && !best; ++m) {
        const HeldOuter& h = held[static_cast<std::size_t>(m)];
        if (of_key(h) && h.mirror && h.mirror->offset == covered && h.mirror->count > 0)
          best = OuterSource{m, true}, best_count = h.mirror->count;
      }
      if (!best) break;
      out.sources.push_back(*best);
      covered += best_count;
    }
    if (covered == model) return out;
  }
  return std::nullopt;
}

std::vector<std::byte> outer_snapshot(const Checkpoint& whole) {
  Checkpoint snapshot;
  for (const auto& name : whole.names())
    if (outer(name) && name != "outer.start" && name != "outer.residual" && name != "outer.moves") {
      const auto bytes = whole.get(name);
      snapshot.put(name, std::vector<std::byte>(bytes.begin(), bytes.end()));
    }
  return encode_checkpoint(snapshot);
}

}  // namespace meridian
