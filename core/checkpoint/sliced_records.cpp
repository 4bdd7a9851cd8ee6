#include "core/checkpoint/sliced_records.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <utility>
#include <vector>

namespace meridian {
namespace {

constexpr const char* kRange = "sliced.range";
constexpr const char* kValues = "sliced.values";
constexpr const char* kShared = "sliced.shared";

std::set<std::string> names_in(const std::string& list) {
  std::set<std::string> out;
  std::size_t begin = 0;
  while (begin < list.size()) {
    const std::size_t end = std::min(list.find('\n', begin), list.size());
    out.insert(list.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

std::string text_of(const Checkpoint& part, const char* record, const std::string& source) {
  if (!part.has(record)) throw make_error(ErrorKind::Checkpoint, source, ": record \"", record, "\" is missing");
  const auto bytes = part.get(record);
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

}  // namespace

void join_slices(std::span<const RecordSlice> slices, const SliceKinds& kinds, ErrorKind error, Checkpoint& out) {
  MERIDIAN_CHECK(!slices.empty(), "no slices to join");
  std::vector<const RecordSlice*> order;
  for (const auto& s : slices) order.push_back(&s);
  std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  const std::size_t total = order.front()->total;
  std::size_t covered = 0;
  for (const RecordSlice* s : order) {
    if (s->total != total || s->offset != covered || s->count > total - covered)
      throw make_error(error, s->source, ": elements ", s->offset, "+", s->count, " of ", s->total,
                       " do not follow the slices before it (", covered, " of ", total, ")");
    covered += s->count;
  }
  if (covered != total) throw make_error(error, "the slices cover ", covered, " of ", total, " elements");
  const Checkpoint& first = *slices.front().records;
  for (const auto& name : first.names()) {
    if (!kinds.member(name)) continue;
    const bool per_value = kinds.per_value(name);
    std::vector<std::byte> joined;
    if (per_value) joined.reserve(total * sizeof(float));  // no regrowth: the record is a model's size
    for (const RecordSlice* s : order) {
      if (!s->records->has(name)) throw make_error(error, s->source, " has no record \"", name, "\"");
      const auto bytes = s->records->get(name);
      if (!per_value) {
        if (!std::ranges::equal(bytes, first.get(name)))
          throw make_error(error, s->source, ": the slices disagree on record \"", name, "\"");
        continue;
      }
      if (bytes.size() != s->count * sizeof(float))
        throw make_error(error, s->source, ": record \"", name, "\" holds ", bytes.size() / sizeof(float),
                         " values, the slice ", s->count);
      joined.insert(joined.end(), bytes.begin(), bytes.end());
    }
    if (!per_value) joined.assign(first.get(name).begin(), first.get(name).end());
    out.put(name, std::move(joined));
  }
}

RangeRecords::RangeRecords(std::size_t offset, std::size_t count, SliceKinds kinds, ErrorKind error)
    : offset_(offset), count_(count), kinds_(std::move(kinds)), error_(error) {}

void RangeRecords::take(const RecordSlice& slice) {
  const std::size_t begin = std::max(offset_, slice.offset),
                    end = std::min(offset_ + count_, slice.offset + slice.count);
  for (const auto& name : slice.records->names()) {
    if (!kinds_.member(name)) continue;
    const auto bytes = slice.records->get(name);
    if (!kinds_.per_value(name)) {
      if (!records_.has(name))
        records_.put(name, std::vector<std::byte>(bytes.begin(), bytes.end()));
      else if (!std::ranges::equal(records_.get(name), bytes))
        throw make_error(error_, slice.source, ": the slices disagree on record \"", name, "\"");
      continue;
    }
    if (bytes.size() != slice.count * sizeof(float))
      throw make_error(error_, slice.source, ": record \"", name, "\" holds ", bytes.size() / sizeof(float),
                       " values, the slice ", slice.count);
    Values& into = values_[name];
    into.bytes.resize(count_ * sizeof(float));
    if (begin >= end) continue;
    std::memcpy(into.bytes.data() + (begin - offset_) * sizeof(float),
                bytes.data() + (begin - slice.offset) * sizeof(float), (end - begin) * sizeof(float));
    into.covered += end - begin;
  }
}

Checkpoint RangeRecords::finish() && {
  for (auto& [name, values] : values_) {
    if (values.covered != count_)
      throw make_error(error_, "record \"", name, "\": the slices hold ", values.covered, " of the ", count_,
                       " values of elements ", offset_, "+", count_);
    records_.put(name, std::move(values.bytes));
  }
  return std::move(records_);
}

void put_slice(Checkpoint& part, const Checkpoint& records, const SliceKinds& kinds, std::size_t offset,
               std::size_t count, std::size_t total) {
  MERIDIAN_CHECK(offset <= total && count <= total - offset, "a slice at ", offset, "+", count, " of ", total);
  std::string values, shared;
  for (const auto& name : records.names()) {
    if (!kinds.member(name)) continue;
    const auto bytes = records.get(name);
    const bool per_value = kinds.per_value(name);
    MERIDIAN_CHECK(name.find('\n') == std::string::npos && (!per_value || bytes.size() == count * sizeof(float)),
                   "record \"", name, "\" of ", bytes.size(), " bytes in a slice of ", count, " values");
    part.put(name, std::vector<std::byte>(bytes.begin(), bytes.end()));
    (per_value ? values : shared) += name + '\n';
  }
  part.put_pod<std::uint64_t>(kRange, std::vector<std::uint64_t>{offset, count, total});
  part.put_pod<char>(kValues, std::span<const char>(values));
  part.put_pod<char>(kShared, std::span<const char>(shared));
}

SliceKinds StoredSlice::kinds() const {
  auto per_value = std::make_shared<const std::set<std::string>>(names_in(values));
  auto shared_names = std::make_shared<const std::set<std::string>>(names_in(shared));
  return {[per_value, shared_names](const std::string& name) {
            return per_value->contains(name) || shared_names->contains(name);
          },
          [per_value](const std::string& name) { return per_value->contains(name); }};
}

std::optional<StoredSlice> stored_slice(const Checkpoint& part, const std::string& source) {
  if (!part.has(kRange)) return std::nullopt;
  const auto range = part.get_pod<std::uint64_t>(kRange);
  // The bound keeps a count's size in bytes from wrapping around (a model of 2^40 values is 4 TB).
  if (range.size() != 3 || range[2] > (std::uint64_t{1} << 40) || range[0] > range[2] || range[1] > range[2] - range[0])
    throw make_error(ErrorKind::Checkpoint, source, ": record \"", kRange, "\" is not a slice of a state");
  StoredSlice out{
      {range[0], range[1], range[2], &part, source}, text_of(part, kValues, source), text_of(part, kShared, source)};
  for (const auto* list : {&out.values, &out.shared})
    for (const auto& name : names_in(*list))
      if (!part.has(name))
        throw make_error(ErrorKind::Checkpoint, source, ": its slice names record \"", name,
                         "\", which it does not hold");
  return out;
}

}  // namespace meridian
