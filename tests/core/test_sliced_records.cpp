// A state's records kept in slices across replicas (core/checkpoint/sliced_records.hpp): written
// into part files with their description, read back, joined to the whole state's records; slices
// that do not make one state are refused, naming the slice.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint.hpp"
#include "core/checkpoint/sliced_records.hpp"
#include "core/util/error.hpp"

using namespace meridian;

namespace {

const SliceKinds kKinds{[](const std::string& name) { return name.starts_with("state."); },
                        [](const std::string& name) { return name == "state.a" || name == "state.b"; }};

std::vector<float> ramp(std::size_t offset, std::size_t count, float scale) {
  std::vector<float> out;
  for (std::size_t i = offset; i < offset + count; ++i) out.push_back(scale * static_cast<float>(i));
  return out;
}

// The records a replica holding elements [offset, offset + count) of 10 keeps.
Checkpoint held(std::size_t offset, std::size_t count, std::int64_t version = 3) {
  Checkpoint out;
  out.put_pod<float>("state.a", ramp(offset, count, 1.0f));
  out.put_value<std::int64_t>("state.version", version);
  out.put_pod<float>("state.b", ramp(offset, count, -2.0f));
  out.put_value<std::int64_t>("other", 7);  // not the state's
  return out;
}

Checkpoint part_file(std::size_t offset, std::size_t count, std::int64_t version = 3) {
  Checkpoint file;
  file.put_value<std::int64_t>("train.step", 12);
  put_slice(file, held(offset, count, version), kKinds, offset, count, 10);
  return file;
}

// The part files' slices, joined as read_checkpoint joins them.
Checkpoint join_files(const std::vector<Checkpoint>& files) {
  std::vector<StoredSlice> stored;
  for (std::size_t i = 0; i < files.size(); ++i) stored.push_back(*stored_slice(files[i], "part " + std::to_string(i)));
  std::vector<RecordSlice> slices;
  for (const auto& s : stored) slices.push_back(s.slice);
  Checkpoint out;
  join_slices(slices, stored.front().kinds(), ErrorKind::Checkpoint, out);
  return out;
}

std::string refusal(const std::vector<Checkpoint>& files) {
  try {
    join_files(files);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Checkpoint);
    return e.what();
  }
  FAIL("joined");
  return "";
}

}  // namespace

TEST_CASE("slices written into part files join, in any order, to the whole state's records") {
  const std::vector<Checkpoint> files = {part_file(4, 6), part_file(0, 0), part_file(0, 4)};
  const auto stored = stored_slice(files[0], "part 0");
  REQUIRE(stored);
  CHECK(stored->slice.offset == 4);
  CHECK(stored->slice.count == 6);
  CHECK(stored->slice.total == 10);
  CHECK(stored->values == "state.a\nstate.b\n");
  CHECK(stored->shared == "state.version\n");
  CHECK_FALSE(files[0].has("other"));
  const Checkpoint joined = join_files(files);
  CHECK(joined.names() == std::vector<std::string>{"state.a", "state.version", "state.b"});
  CHECK(joined.get_pod<float>("state.a") == ramp(0, 10, 1.0f));
  CHECK(joined.get_pod<float>("state.b") == ramp(0, 10, -2.0f));
  CHECK(joined.get_value<std::int64_t>("state.version") == 3);
  CHECK_FALSE(stored_slice(held(0, 10), "whole"));
}

TEST_CASE("slices that do not make one state are refused, naming the slice") {
  CHECK(refusal({part_file(0, 4), part_file(5, 5)}).find("part 1: elements 5+5 of 10 do not follow") !=
        std::string::npos);
  CHECK(refusal({part_file(0, 4), part_file(0, 4), part_file(4, 6)}).find("do not follow") != std::string::npos);
  CHECK(refusal({part_file(0, 4)}).find("the slices cover 4 of 10 elements") != std::string::npos);
  CHECK(
      refusal({part_file(0, 4), part_file(4, 6, 4)}).find("part 1: the slices disagree on record \"state.version\"") !=
      std::string::npos);
  Checkpoint short_values;
  put_slice(short_values, held(4, 6), kKinds, 4, 6, 10);
  short_values.put_pod<float>("state.b", ramp(4, 5, 1.0f));
  CHECK(refusal({part_file(0, 4), short_values}).find("part 1: record \"state.b\" holds 5 values, the slice 6") !=
        std::string::npos);
}

TEST_CASE("a part file whose slice description is malformed is refused, naming the file") {
  const auto error_of = [](const Checkpoint& file) {
    try {
      stored_slice(file, "ckpt.part");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Checkpoint);
      return std::string(e.what());
    }
    FAIL("read");
    return std::string();
  };
  Checkpoint beyond = part_file(4, 6);
  beyond.put_pod<std::uint64_t>("sliced.range", std::vector<std::uint64_t>{4, 7, 10});
  CHECK(error_of(beyond).find("ckpt.part: record \"sliced.range\" is not a slice of a state") != std::string::npos);
  Checkpoint unlisted = part_file(4, 6);
  const std::string names = "state.a\nstate.c\n";
  unlisted.put_pod<char>("sliced.values", std::span<const char>(names));
  CHECK(error_of(unlisted).find("names record \"state.c\", which it does not hold") != std::string::npos);
  Checkpoint no_lists;
  no_lists.put_pod<std::uint64_t>("sliced.range", std::vector<std::uint64_t>{0, 10, 10});
  CHECK(error_of(no_lists).find("record \"sliced.values\" is missing") != std::string::npos);
}

TEST_CASE("a range's records from the slices that overlap it, in any order, are the joined records cut to the range") {
  const Checkpoint a = held(0, 4), b = held(4, 3), c = held(7, 3);
  const RecordSlice slices[] = {{7, 3, 10, &c, "c"}, {0, 4, 10, &a, "a"}, {4, 3, 10, &b, "b"}};
  for (std::size_t offset = 0; offset < 10; ++offset)
    for (std::size_t count = 1; offset + count <= 10; ++count) {
      CAPTURE(offset);
      CAPTURE(count);
      RangeRecords range(offset, count, kKinds, ErrorKind::Peer);
      for (const auto& s : slices)
        if (s.offset < offset + count && offset < s.offset + s.count) range.take(s);
      const Checkpoint out = std::move(range).finish();
      CHECK(out.get_pod<float>("state.a") == ramp(offset, count, 1.0f));
      CHECK(out.get_pod<float>("state.b") == ramp(offset, count, -2.0f));
      CHECK(out.get_value<std::int64_t>("state.version") == 3);
      CHECK_FALSE(out.has("other"));
    }
  // A slice of another version, a miscounted one, and values of the range no slice held are refused.
  const Checkpoint other = held(4, 3, 4);
  RangeRecords mixed(0, 7, kKinds, ErrorKind::Peer);
  mixed.take(slices[1]);
  CHECK_THROWS_WITH_AS(mixed.take({4, 3, 10, &other, "b at version 4"}),
                       doctest::Contains("b at version 4: the slices disagree on record \"state.version\""), Error);
  RangeRecords miscounted(0, 7, kKinds, ErrorKind::Peer);
  CHECK_THROWS_WITH_AS(miscounted.take({4, 2, 10, &b, "b"}), doctest::Contains("holds 3 values, the slice 2"), Error);
  RangeRecords short_of(0, 7, kKinds, ErrorKind::Peer);
  short_of.take(slices[1]);
  CHECK_THROWS_WITH_AS(std::move(short_of).finish(), doctest::Contains("the slices hold 4 of the 7 values"), Error);
}
