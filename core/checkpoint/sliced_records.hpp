#pragma once
// The records of a state cut across a group's replicas, each holding a slice: the values of its
// elements [offset, offset + count) of `total` for the records that hold one 4-byte value per
// element, and the whole of the others (the same in every slice). Joined in element order, the
// slices give the records a whole state holds. A checkpoint written in parts (store.hpp) carries
// one slice in each part file: its records, "sliced.range" (u64 offset, count, total) and
// "sliced.values" and "sliced.shared" (the names of each kind, '\n'-joined), so the reader joins
// them without knowing whose state they are.
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint.hpp"
#include "core/util/error.hpp"

namespace meridian {

struct RecordSlice {
  std::size_t offset = 0, count = 0, total = 0;
  const Checkpoint* records = nullptr;
  std::string source;  // what errors call it
};

// Which records of a checkpoint belong to the state, and which of those hold a value per element.
struct SliceKinds {
  std::function<bool(const std::string&)> member;
  std::function<bool(const std::string&)> per_value;
};

// The state's records from its slices, in any order, put into `out` (the first slice's record
// order). Error(`error`) naming the slice when they do not cover [0, total) exactly once, disagree
// on the total or on a record that is not per value, or a slice lacks a record or holds another
// count of values than its range's.
void join_slices(std::span<const RecordSlice> slices, const SliceKinds& kinds, ErrorKind error, Checkpoint& out);

// The records of one range [offset, offset + count) of a state, put together from slices that
// overlap it, in any order and not overlapping one another: each per-value record's values that
// fall in the range, and the others as every slice has them. What a replica keeps of the slices
// its group or its checkpoint's part files hold, for the part it holds from now on, without the
// whole state's records.
class RangeRecords {
 public:
  RangeRecords(std::size_t offset, std::size_t count, SliceKinds kinds, ErrorKind error);
  // Error(`error`) naming the slice when a per-value record holds another count of values than its
  // range's, or a record not per value differs from an earlier slice's.
  void take(const RecordSlice& slice);
  // Error(`error`) when a per-value record misses values of the range.
  Checkpoint finish() &&;

 private:
  std::size_t offset_, count_;
  SliceKinds kinds_;
  ErrorKind error_;
  Checkpoint records_;  // those not per value
  struct Values {
    std::vector<std::byte> bytes;
    std::size_t covered = 0;
  };
  std::map<std::string, Values> values_;
};

// `records`' members, with the "sliced.*" records that describe them, into `part`.
void put_slice(Checkpoint& part, const Checkpoint& records, const SliceKinds& kinds, std::size_t offset,
               std::size_t count, std::size_t total);

// The slice a part file carries (nullopt when it carries none), and the kinds its lists name.
// Error(Checkpoint) naming `source` when its "sliced.*" records are malformed or name a record
// it does not hold, or the state has more than 2^40 values.
struct StoredSlice {
  RecordSlice slice;
  std::string values, shared;  // the lists, as written
  SliceKinds kinds() const;
};
std::optional<StoredSlice> stored_slice(const Checkpoint& part, const std::string& source);

}  // namespace meridian
