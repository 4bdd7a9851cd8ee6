// read_checkpoint (store.hpp) and read_checkpoint_head: the two ways of reading a checkpoint
// written in parts, with the same checks of every part.
#include "core/checkpoint/checkpoint_parts.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "core/checkpoint/sliced_records.hpp"
#include "core/checkpoint/store.hpp"
#include "core/io/env.hpp"
#include "core/util/error.hpp"

namespace meridian {
namespace {

namespace fs = std::filesystem;

struct Manifest {
  std::vector<std::pair<std::size_t, std::size_t>> parts;  // offset, count
  std::int64_t step = 0;
  bool weights_in_parts = false;  // ZeRO stage 3; otherwise the leader's file has them whole
  std::size_t total = 0;
};

// The parts `head` names, in order and without gaps (Error(Checkpoint) otherwise).
Manifest manifest_of(const Checkpoint& head, const fs::path& path) {
  const auto list = head.get_pod<std::uint64_t>("adamw.parts");
  if (list.empty() || list.size() != 1 + 2 * list[0])
    throw make_error(ErrorKind::Checkpoint, path.string(), ": record \"adamw.parts\" is not a list of parts");
  Manifest m;
  m.step = head.get_value<std::int64_t>("train.step");
  m.weights_in_parts = !head.has("params");
  std::size_t named = 0;
  for (std::size_t i = 0; i < list[0]; ++i) {
    if (list[2 + 2 * i] > (std::uint64_t{1} << 40))
      throw make_error(ErrorKind::Checkpoint, path.string(), ": part ", i, " has ", list[2 + 2 * i], " elements");
    m.parts.emplace_back(list[1 + 2 * i], list[2 + 2 * i]);
    named += m.parts.back().second;
  }
  m.total = m.weights_in_parts ? named : head.get("params").size() / sizeof(float);
  std::size_t next = 0;
  for (std::size_t i = 0; i < m.parts.size(); ++i) {
    const auto [offset, count] = m.parts[i];
    if (offset != next || count > m.total - offset)
      throw make_error(ErrorKind::Checkpoint, path.string(), ": part ", i, " (elements ", offset, "+", count,
                       ") does not follow the previous one in a model of ", m.total);
    next = offset + count;
  }
  if (next != m.total)
    throw make_error(ErrorKind::Checkpoint, path.string(), ": its parts cover ", next, " of ", m.total, " elements");
  return m;
}

// Part i's file, read and checked: the step and range the manifest names, and its records' sizes.
Checkpoint read_part(Env& env, const fs::path& path, const Manifest& m, std::size_t i) {
  const auto [offset, count] = m.parts[i];
  const fs::path file = part_path(path, offset);
  if (!env.exists(file))
    throw make_error(ErrorKind::Checkpoint, path.string(), ": its part ", file.string(), " is missing");
  Checkpoint part = decode_checkpoint(env.read_all(file), file.string());
  const auto range = part.get_pod<std::uint64_t>("adamw.shard");
  if (part.get_value<std::int64_t>("train.step") != m.step || range.size() != 2 || range[0] != offset ||
      range[1] != count)
    throw make_error(ErrorKind::Checkpoint, file.string(), " is not the part ", path.string(), " names (step ", m.step,
                     ", elements ", offset, "+", count, ")");
  for (const char* record : {"adamw.m", "adamw.v", "params"}) {
    if (std::string_view(record) == "params" && !m.weights_in_parts) continue;
    if (!part.has(record))
      throw make_error(ErrorKind::Checkpoint, file.string(), ": record \"", record, "\" is missing");
    if (const auto n = part.get(record).size(); n != count * sizeof(float))
      throw make_error(ErrorKind::Checkpoint, file.string(), ": record \"", record, "\" holds ", n / sizeof(float),
                       " values, the part has ", count);
  }
  return part;
}

// Copies the values of `record` (which start at element `from`) that fall in [offset, offset +
// count) into `into`, which starts at element `offset`.
void copy_overlap(const Checkpoint& part, const std::string& record, std::size_t from, std::size_t offset,
                  std::size_t count, std::vector<std::byte>& into) {
  const auto values = part.view_pod<float>(record);
  const std::size_t begin = std::max(from, offset), end = std::min(from + values.size(), offset + count);
  if (begin < end)
    std::memcpy(into.data() + (begin - offset) * sizeof(float), values.data() + (begin - from),
                (end - begin) * sizeof(float));
}

// A part's slice (sliced_records.hpp), its records copied out of the part, which is then dropped.
struct HeldSlice {
  StoredSlice stored;
  std::unique_ptr<Checkpoint> records;
};

HeldSlice keep_slice(const Checkpoint& part, StoredSlice stored) {
  auto records = std::make_unique<Checkpoint>();
  const SliceKinds kinds = stored.kinds();
  for (const auto& name : part.names())
    if (kinds.member(name)) {
      const auto bytes = part.get(name);
      records->put(name, std::vector<std::byte>(bytes.begin(), bytes.end()));
    }
  stored.slice.records = records.get();
  return {std::move(stored), std::move(records)};
}

// Every part carries a slice of one state of the model's size, naming the same records, or none does.
void check_slices(const fs::path& path, const std::vector<std::optional<StoredSlice>>& slices, std::size_t elements) {
  const auto carried = std::count_if(slices.begin(), slices.end(), [](const auto& s) { return s.has_value(); });
  if (carried == 0) return;
  if (static_cast<std::size_t>(carried) != slices.size())
    throw make_error(ErrorKind::Checkpoint, path.string(), ": ", carried, " of its ", slices.size(),
                     " parts carry a slice of a sharded state");
  const StoredSlice& first = *slices.front();
  for (const auto& s : slices) {
    if (s->slice.total != elements)
      throw make_error(ErrorKind::Checkpoint, s->slice.source, ": its slice is of a state of ", s->slice.total,
                       " values, the model has ", elements);
    if (s->values != first.values || s->shared != first.shared)
      throw make_error(ErrorKind::Checkpoint, s->slice.source, ": its slice names other records than ",
                       first.slice.source, "'s");
  }
}

void join_held_slices(const fs::path& path, std::span<const HeldSlice> held, Checkpoint& out) {
  if (held.empty()) return;
  std::vector<RecordSlice> slices;
  for (const auto& h : held) slices.push_back(h.stored.slice);
  const SliceKinds kinds = held.front().stored.kinds();
  for (const auto& name : out.names())
    if (kinds.member(name))
      throw make_error(ErrorKind::Checkpoint, path.string(), ": record \"", name, "\" is both in it and in its parts");
  join_slices(slices, kinds, ErrorKind::Checkpoint, out);
}

}  // namespace

Checkpoint read_checkpoint(Env& env, const fs::path& path) {
  Checkpoint out = decode_checkpoint(env.read_all(path), path.string());
  if (!out.has("adamw.parts")) return out;
  const Manifest manifest = manifest_of(out, path);
  const std::size_t total = manifest.total;
  // Joined straight into the records' own buffers, which `out` then takes (no second copy).
  std::vector<std::byte> m(total * sizeof(float)), v(total * sizeof(float)),
      params(manifest.weights_in_parts ? total * sizeof(float) : 0);
  std::vector<HeldSlice> slices;
  std::vector<std::optional<StoredSlice>> stored;
  for (std::size_t i = 0; i < manifest.parts.size(); ++i) {
    const Checkpoint part = read_part(env, path, manifest, i);
    const std::size_t offset = manifest.parts[i].first;
    for (const auto& [record, into] :
         {std::pair{"adamw.m", &m}, std::pair{"adamw.v", &v}, std::pair{"params", &params}})
      if (!into->empty()) copy_overlap(part, record, offset, 0, total, *into);
    stored.push_back(stored_slice(part, part_path(path, offset).string()));
    if (stored.back()) slices.push_back(keep_slice(part, *stored.back()));
  }
  check_slices(path, stored, total);
  out.put("adamw.m", std::move(m));
  out.put("adamw.v", std::move(v));
  if (manifest.weights_in_parts) out.put("params", std::move(params));
  join_held_slices(path, slices, out);
  return out;
}

CheckpointHead read_checkpoint_head(Env& env, const fs::path& path) {
  CheckpointHead out{decode_checkpoint(env.read_all(path), path.string()), std::nullopt};
  if (!out.head.has("adamw.parts")) return out;
  const Manifest manifest = manifest_of(out.head, path);
  CheckpointParts parts;
  parts.env_ = &env;
  parts.path_ = path;
  parts.step_ = manifest.step;
  if (out.head.has("adamw.t")) parts.adamw_steps_ = out.head.get_value<std::int64_t>("adamw.t");
  parts.total_ = manifest.total;
  std::vector<std::byte> params(manifest.weights_in_parts ? manifest.total * sizeof(float) : 0);
  std::vector<std::optional<StoredSlice>> stored;
  for (std::size_t i = 0; i < manifest.parts.size(); ++i) {
    const auto [offset, count] = manifest.parts[i];
    const Checkpoint part = read_part(env, path, manifest, i);
    if (!params.empty()) copy_overlap(part, "params", offset, 0, manifest.total, params);
    auto slice = stored_slice(part, part_path(path, offset).string());
    if (slice) {
      const SliceKinds kinds = slice->kinds();
      for (const auto& name : part.names())
        if (kinds.per_value(name) && part.get(name).size() != slice->slice.count * sizeof(float))
          throw make_error(ErrorKind::Checkpoint, slice->slice.source, ": record \"", name, "\" holds ",
                           part.get(name).size() / sizeof(float), " values, the slice ", slice->slice.count);
      parts.parts_.push_back({offset, count, slice->slice.offset, slice->slice.count});
      slice->slice.records = nullptr;  // the part is let go
    } else {
      parts.parts_.push_back({offset, count, 0, 0});
    }
    stored.push_back(std::move(slice));
  }
  check_slices(path, stored, manifest.total);
  if (stored.front()) {
    // The slices, in element order, cover the state once (as join_slices requires of a whole read).
    std::vector<CheckpointParts::Part> order = parts.parts_;
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.slice_offset < b.slice_offset; });
    std::size_t covered = 0;
    for (const auto& p : order) {
      if (p.slice_offset != covered)
        throw make_error(ErrorKind::Checkpoint, path.string(), ": its parts' slices leave elements ", covered, "..",
                         p.slice_offset, " out or hold them twice");
      covered += p.slice_count;
    }
    if (covered != manifest.total)
      throw make_error(ErrorKind::Checkpoint, path.string(), ": its parts' slices cover ", covered, " of ",
                       manifest.total, " elements");
    parts.slices_ = stored.front()->values;
    parts.shared_ = stored.front()->shared;
    parts.kinds_ = stored.front()->kinds();
  }
  if (!params.empty()) out.head.put("params", std::move(params));
  out.parts = std::move(parts);
  return out;
}

Checkpoint CheckpointParts::read_part(std::size_t index) const {
  Manifest m;
  m.step = step_;
  m.total = total_;
  m.weights_in_parts = false;  // the weights were taken when the parts were checked
  for (const auto& p : parts_) m.parts.emplace_back(p.offset, p.count);
  return meridian::read_part(*env_, path_, m, index);
}

Checkpoint CheckpointParts::read_whole() const { return read_checkpoint(*env_, path_); }

Checkpoint CheckpointParts::moments(std::size_t offset, std::size_t count) const {
  MERIDIAN_CHECK(offset <= total_ && count <= total_ - offset, "moments ", offset, "+", count, " of ", total_);
  std::vector<std::byte> m(count * sizeof(float)), v(count * sizeof(float));
  for (std::size_t i = 0; i < parts_.size(); ++i) {
    const Part& p = parts_[i];
    if (p.offset >= offset + count || p.offset + p.count <= offset) continue;
    const Checkpoint part = read_part(i);
    copy_overlap(part, "adamw.m", p.offset, offset, count, m);
    copy_overlap(part, "adamw.v", p.offset, offset, count, v);
  }
  Checkpoint out;
  out.put("adamw.m", std::move(m));
  out.put("adamw.v", std::move(v));
  out.put_pod<std::uint64_t>("adamw.shard", std::vector<std::uint64_t>{offset, count});
  if (adamw_steps_) out.put_value<std::int64_t>("adamw.t", *adamw_steps_);
  return out;
}

Checkpoint CheckpointParts::slice(std::size_t offset, std::size_t count) const {
  MERIDIAN_CHECK(has_slices() && offset <= total_ && count <= total_ - offset, "a slice at ", offset, "+", count,
                 " of ", total_, " from parts ", has_slices() ? "with" : "without", " slices");
  RangeRecords out(offset, count, kinds_, ErrorKind::Checkpoint);
  for (std::size_t i = 0; i < parts_.size(); ++i) {
    const Part& p = parts_[i];
    // A range of no value still takes the records that are not per value, from the first part.
    const bool overlaps = p.slice_offset < offset + count && offset < p.slice_offset + p.slice_count;
    if (!overlaps && (count > 0 || i > 0)) continue;
    const Checkpoint part = read_part(i);
    const std::string source = part_path(path_, p.offset).string();
    const auto stored = stored_slice(part, source);
    if (!stored || stored->values != slices_ || stored->shared != shared_ || stored->slice.offset != p.slice_offset ||
        stored->slice.count != p.slice_count)
      throw make_error(ErrorKind::Checkpoint, source, ": its slice is not the one it held when checked");
    out.take(stored->slice);
  }
  return std::move(out).finish();
}

}  // namespace meridian
