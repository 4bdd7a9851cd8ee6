// Checkpoints written in parts (core/checkpoint/store.hpp): each replica's part of the moments in
// a file of its own, and the leader's file naming them. Read back whole; unusable without every
// part as named; pruned with their checkpoint.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint.hpp"
#include "core/checkpoint/sliced_records.hpp"
#include "core/checkpoint/store.hpp"
#include "core/io/env.hpp"
#include "core/util/error.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::TempDir;

namespace {

constexpr std::size_t kElements = 10;
const std::vector<std::size_t> kParts = {4, 3, 3};

float m_at(std::int64_t step, std::size_t i) { return static_cast<float>(step) + 0.5f * static_cast<float>(i); }

Checkpoint part_of(std::int64_t step, std::size_t offset, std::size_t count) {
  std::vector<float> m, v;
  for (std::size_t i = offset; i < offset + count; ++i) {
    m.push_back(m_at(step, i));
    v.push_back(2 * m_at(step, i));
  }
  Checkpoint part;
  part.put_pod<float>("adamw.m", m);
  part.put_pod<float>("adamw.v", v);
  part.put_pod<std::uint64_t>("adamw.shard", std::vector<std::uint64_t>{offset, count});
  part.put_value<std::int64_t>("train.step", step);
  return part;
}

// A state cut otherwise than the moments (6, 4 and no elements), each part file carrying a slice.
const SliceKinds kOuter{[](const std::string& name) { return name.starts_with("outer."); },
                        [](const std::string& name) { return name == "outer.global"; }};
constexpr std::size_t kSlices[] = {0, 6, 10, 10};

void put_outer(Checkpoint& part, std::size_t index) {
  const std::size_t offset = kSlices[index], count = kSlices[index + 1] - offset;
  Checkpoint records;
  records.put_pod<float>("outer.global", std::vector<float>(count, static_cast<float>(index)));
  records.put_value<std::int64_t>("outer.version", 4);
  put_slice(part, records, kOuter, offset, count, kElements);
}

// Every part, then the leader's file, as a sharded site saves them; the first `sliced` parts
// carry their slice of an outer state too.
void save_in_parts(CheckpointStore& store, std::int64_t step, std::size_t sliced = 0) {
  std::vector<std::uint64_t> manifest = {kParts.size()};
  std::size_t offset = 0;
  for (std::size_t index = 0; index < kParts.size(); ++index) {
    const std::size_t count = kParts[index];
    Checkpoint part = part_of(step, offset, count);
    if (index < sliced) put_outer(part, index);
    store.save_part(step, offset, part);
    manifest.insert(manifest.end(), {offset, count});
    offset += count;
  }
  Checkpoint main;
  main.put_pod<float>("params", std::vector<float>(kElements, 1.0f));
  main.put_value<std::int64_t>("train.step", step);
  main.put_pod<std::uint64_t>("adamw.parts", manifest);
  store.save(step, main);
}

std::vector<std::string> files(const TempDir& dir) {
  auto names = posix_env().list_dir(dir.path());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("a checkpoint in parts reads back with the whole model's moments") {
  TempDir dir("parts-read");
  CheckpointStore store(posix_env(), dir.path(), 2);
  save_in_parts(store, 7);
  const auto loaded = store.load_latest();
  REQUIRE(loaded);
  CHECK(loaded->step == 7);
  const auto m = loaded->checkpoint.get_pod<float>("adamw.m"), v = loaded->checkpoint.get_pod<float>("adamw.v");
  REQUIRE(m.size() == kElements);
  for (std::size_t i = 0; i < kElements; ++i) {
    CHECK(m[i] == m_at(7, i));
    CHECK(v[i] == 2 * m_at(7, i));
  }
  CHECK(part_path(store.path_for(7), 4).filename() == "ckpt-0000000007.part-000000000004.mrdn");
}

TEST_CASE("a checkpoint whose parts carry slices of a state reads back with the state's records joined") {
  TempDir dir("parts-sliced");
  CheckpointStore store(posix_env(), dir.path(), 2);
  save_in_parts(store, 7, kParts.size());
  const Checkpoint read = read_checkpoint(posix_env(), store.path_for(7));
  CHECK(read.get_pod<float>("outer.global") == std::vector<float>{0, 0, 0, 0, 0, 0, 1, 1, 1, 1});
  CHECK(read.get_value<std::int64_t>("outer.version") == 4);
  CHECK(read.get_pod<float>("adamw.m").size() == kElements);
  CHECK_FALSE(read.has("sliced.range"));
  // A part without its slice, or a leader's file that holds the state too, is refused.
  save_in_parts(store, 8, kParts.size() - 1);
  CHECK_THROWS_WITH_AS(read_checkpoint(posix_env(), store.path_for(8)),
                       doctest::Contains("2 of its 3 parts carry a slice of a sharded state"), Error);
  Checkpoint main = decode_checkpoint(posix_env().read_all(store.path_for(7)), "main");
  main.put_value<std::int64_t>("outer.version", 4);
  store.save(7, main);
  CHECK_THROWS_WITH_AS(read_checkpoint(posix_env(), store.path_for(7)),
                       doctest::Contains("record \"outer.version\" is both in it and in its parts"), Error);
}

TEST_CASE("a part missing, damaged, of another step or another range makes its checkpoint unusable, and the older one loads") {
  TempDir dir("parts-bad");
  CheckpointStore store(posix_env(), dir.path(), 3);
  save_in_parts(store, 3);
  save_in_parts(store, 5);
  const auto second = part_path(store.path_for(5), 4);
  std::string expect;
  SUBCASE("missing") {
    posix_env().remove(second);
    expect = "is missing";
  }
  SUBCASE("damaged") {
    auto bytes = posix_env().read_all(second);
    bytes[bytes.size() / 2] ^= std::byte{1};
    posix_env().create(second)->append(bytes);
    expect = second.string();
  }
  SUBCASE("of another step") {
    store.save_part(5, 4, part_of(4, 4, 3));
    expect = "is not the part";
  }
  SUBCASE("of another range") {
    store.save_part(5, 4, part_of(5, 4, 2));
    expect = "is not the part";
  }
  std::vector<std::string> warnings;
  const auto loaded = store.load_latest([&](const std::string& w) { warnings.push_back(w); });
  REQUIRE(loaded);
  CHECK(loaded->step == 3);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find(expect) != std::string::npos);
  CHECK_THROWS_AS(read_checkpoint(posix_env(), store.path_for(5)), Error);
}

TEST_CASE("parts go with their checkpoint, and with an older step whose checkpoint was never written") {
  TempDir dir("parts-prune");
  CheckpointStore store(posix_env(), dir.path(), 1);
  save_in_parts(store, 1);
  store.save_part(2, 0, part_of(2, 0, 4));  // the leader died before step 2's file
  save_in_parts(store, 3);
  CHECK(files(dir) == std::vector<std::string>{"ckpt-0000000003.mrdn", "ckpt-0000000003.part-000000000000.mrdn",
                                               "ckpt-0000000003.part-000000000004.mrdn",
                                               "ckpt-0000000003.part-000000000007.mrdn"});
}

TEST_CASE("a save cleans the temp files no writer will finish, not a part another replica is writing") {
  TempDir dir("parts-tmp");
  CheckpointStore store(posix_env(), dir.path(), 2);
  const auto tmp = [&](const std::string& name) {
    posix_env().create(dir / name)->append(std::vector<std::byte>(8));
    return name;
  };
  const auto own = tmp("ckpt-0000000007.mrdn.tmp");                      // the leader's, any step
  const auto older = tmp("ckpt-0000000002.part-000000000004.mrdn.tmp");  // a member died writing it
  // A member already writing the next save's part: of this same step (the last periodic
  // checkpoint, then the final one), or of a later one.
  const auto same = tmp("ckpt-0000000003.part-000000000009.mrdn.tmp");
  const auto later = tmp("ckpt-0000000004.part-000000000000.mrdn.tmp");
  save_in_parts(store, 3);
  const auto left = files(dir);
  const auto has = [&](const std::string& name) { return std::find(left.begin(), left.end(), name) != left.end(); };
  CHECK_FALSE(has(own));
  CHECK_FALSE(has(older));
  CHECK(has(same));
  CHECK(has(later));
  save_in_parts(store, 5);  // once their step is past, they are leftovers too
  CHECK_FALSE(posix_env().exists(dir / same));
  CHECK_FALSE(posix_env().exists(dir / later));
}

TEST_CASE(
    "a checkpoint in parts read by range: every range of the moments and of the slices is the whole read's, from the "
    "part files that hold it") {
  TempDir dir("parts-range");
  CheckpointStore store(posix_env(), dir.path(), 2);
  save_in_parts(store, 7, kParts.size());
  const Checkpoint whole = read_checkpoint(posix_env(), store.path_for(7));
  const auto loaded = store.load_latest_head();
  REQUIRE(loaded);
  CHECK(loaded->step == 7);
  const Checkpoint& head = loaded->checkpoint.head;
  CHECK_FALSE(head.has("adamw.m"));
  CHECK_FALSE(head.has("outer.global"));
  CHECK(head.get_pod<float>("params") == whole.get_pod<float>("params"));
  REQUIRE(loaded->checkpoint.parts);
  const CheckpointParts& parts = *loaded->checkpoint.parts;
  CHECK(parts.step() == 7);
  CHECK(parts.has_slices());
  const auto cut = [](const std::vector<float>& values, std::size_t offset, std::size_t count) {
    return std::vector<float>(values.begin() + static_cast<std::ptrdiff_t>(offset),
                              values.begin() + static_cast<std::ptrdiff_t>(offset + count));
  };
  for (std::size_t offset = 0; offset <= kElements; ++offset)
    for (std::size_t count = 0; offset + count <= kElements; ++count) {
      CAPTURE(offset);
      CAPTURE(count);
      const Checkpoint moments = parts.moments(offset, count);
      CHECK(moments.get_pod<float>("adamw.m") == cut(whole.get_pod<float>("adamw.m"), offset, count));
      CHECK(moments.get_pod<float>("adamw.v") == cut(whole.get_pod<float>("adamw.v"), offset, count));
      CHECK(moments.get_pod<std::uint64_t>("adamw.shard") == std::vector<std::uint64_t>{offset, count});
      const Checkpoint slice = parts.slice(offset, count);  // of no value: the shared records alone
      CHECK(slice.get_pod<float>("outer.global") == cut(whole.get_pod<float>("outer.global"), offset, count));
      CHECK(slice.get_value<std::int64_t>("outer.version") == 4);
    }
  // Only the files that hold a range are read: without the last part (elements 7..9 of the
  // moments, none of the slices), the others' ranges still read, and its own names it.
  const auto last = part_path(store.path_for(7), 7);
  posix_env().remove(last);
  CHECK(parts.moments(0, 7).get_pod<float>("adamw.m") == cut(whole.get_pod<float>("adamw.m"), 0, 7));
  CHECK(parts.slice(0, kElements).get_pod<float>("outer.global") == whole.get_pod<float>("outer.global"));
  CHECK_THROWS_WITH_AS(parts.moments(6, 2), doctest::Contains((last.string() + " is missing").c_str()), Error);
}

TEST_CASE(
    "a checkpoint in parts read by its head: every part checked first, a bad one skips to the older checkpoint, and a "
    "part changed since is named") {
  TempDir dir("parts-head");
  CheckpointStore store(posix_env(), dir.path(), 3);
  save_in_parts(store, 3);
  save_in_parts(store, 5);
  store.save_part(5, 4, part_of(4, 4, 3));  // of another step
  std::vector<std::string> warnings;
  const auto loaded = store.load_latest_head([&](const std::string& w) { warnings.push_back(w); });
  REQUIRE(loaded);
  CHECK(loaded->step == 3);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("is not the part") != std::string::npos);
  REQUIRE(loaded->checkpoint.parts);
  CHECK_FALSE(loaded->checkpoint.parts->has_slices());
  // Replaced after the check: the read by range refuses it rather than mix two steps.
  store.save_part(3, 4, part_of(2, 4, 3));
  CHECK_THROWS_WITH_AS(loaded->checkpoint.parts->moments(0, kElements), doctest::Contains("is not the part"), Error);
  CHECK(loaded->checkpoint.parts->moments(0, 4).get_pod<float>("adamw.m").front() == m_at(3, 0));
}

TEST_CASE("a checkpoint without parts is its own head, whole") {
  TempDir dir("parts-none");
  CheckpointStore store(posix_env(), dir.path(), 2);
  Checkpoint c;
  c.put_pod<float>("adamw.m", std::vector<float>(kElements, 3.0f));
  store.save(2, c);
  const auto loaded = store.load_latest_head();
  REQUIRE(loaded);
  CHECK_FALSE(loaded->checkpoint.parts);
  CHECK(loaded->checkpoint.head.get_pod<float>("adamw.m") == std::vector<float>(kElements, 3.0f));
}
