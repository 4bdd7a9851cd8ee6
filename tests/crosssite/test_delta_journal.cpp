// The delta journal: what a site reads back after a restart (its own deltas, and the peers' deltas
// of the versions it proposed or applied), on disk and in the simulator's memory alike.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "core/model/shard_map.hpp"
#include "crosssite/codec/codec.hpp"
#include "crosssite/codec/codec_parts.hpp"
#include "crosssite/round/delta_journal.hpp"

namespace meridian {
namespace {

std::vector<std::byte> bytes_of(std::initializer_list<int> v) {
  std::vector<std::byte> out;
  for (const int x : v) out.push_back(static_cast<std::byte>(x));
  return out;
}

struct TempDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("meridian-journal-" + std::to_string(::getpid()));
  ~TempDir() { std::filesystem::remove_all(path); }
};

void exercise(DeltaJournal& j) {
  j.write({"a", 1}, bytes_of({1, 2, 3}));
  j.write({"a", 2}, bytes_of({4}));
  j.write({"b", 1}, bytes_of({}));
  j.write({"a", 2}, bytes_of({5, 6}));  // the same key again: replaced
  auto all = j.load();
  REQUIRE(all.size() == 3);
  CHECK(all.at({"a", 1}) == bytes_of({1, 2, 3}));
  CHECK(all.at({"a", 2}) == bytes_of({5, 6}));
  CHECK(all.at({"b", 1}).empty());
  j.erase_through("a", 1);
  all = j.load();
  CHECK_FALSE(all.contains({"a", 1}));
  CHECK(all.contains({"a", 2}));
  CHECK(all.contains({"b", 1}));  // another site's rounds stay
  CHECK(j.read({"a", 2}) == bytes_of({5, 6}));  // one entry alone
  CHECK(j.read({"b", 1}) == bytes_of({}));
  CHECK_FALSE(j.read({"a", 1}).has_value());
  j.erase({"b", 1});
  CHECK(j.load().size() == 1);
  CHECK_FALSE(j.read({"b", 1}).has_value());
}

}  // namespace

TEST_CASE("delta journal: write, read back, forget, in memory and on disk") {
  MemoryDeltaJournal memory;
  exercise(memory);
  TempDir dir;
  FileDeltaJournal file(dir.path);
  exercise(file);
}

TEST_CASE("delta journal on disk: a new journal over the same directory reads what the last one wrote") {
  TempDir dir;
  {
    FileDeltaJournal j(dir.path);
    j.write({"us-east", 41}, bytes_of({9, 8, 7}));
  }
  FileDeltaJournal again(dir.path);
  const auto all = again.load();
  REQUIRE(all.size() == 1);
  CHECK(all.at({"us-east", 41}) == bytes_of({9, 8, 7}));
}

TEST_CASE("delta journal on disk: files it did not write are left alone and not read") {
  TempDir dir;
  FileDeltaJournal j(dir.path);
  j.write({"a", 3}, bytes_of({1}));
  std::ofstream(dir.path / "a" / "round-000000000003.delta.tmp") << "partial";
  std::ofstream(dir.path / "a" / "notes.txt") << "hello";
  std::ofstream(dir.path / "a" / "round-x.delta") << "bad name";
  const auto all = j.load();
  REQUIRE(all.size() == 1);
  CHECK(all.at({"a", 3}) == bytes_of({1}));
  j.erase_through("a", 100);
  CHECK(j.load().empty());
  CHECK(std::filesystem::exists(dir.path / "a" / "notes.txt"));
}

namespace {

// A delta held in parts: each replica of a group of three journals its part; the journal gives the
// delta back whole once all three are there, not before, and a whole copy wins over parts.
void exercise_parts(DeltaJournal& j) {
  const CodecOptions codec{CodecKind::Int8, 256};
  const std::size_t values = 3 * kShardUnit + 100;
  std::vector<float> delta(values);
  for (std::size_t i = 0; i < values; ++i) delta[i] = 1e-3f * static_cast<float>(static_cast<int>(i % 13) - 6);
  std::vector<std::byte> whole(encoded_size(values, codec));
  encode(delta, codec, whole);
  const ShardMap map(values, 3);
  const auto part = [&](int r) { return encoded_part(whole, map.part(r).offset, map.part(r).count); };
  j.write_part({"b", 4}, 0, 3, part(0));
  j.write_part({"b", 4}, 2, 3, part(2));
  CHECK_FALSE(j.read({"b", 4}).has_value());  // one part short
  CHECK_FALSE(j.load().contains({"b", 4}));
  j.write_part({"b", 4}, 0, 2, part(0));  // a part of another cut does not fill the hole
  CHECK_FALSE(j.read({"b", 4}).has_value());
  j.write_part({"b", 4}, 1, 3, part(1));
  CHECK(j.read({"b", 4}) == whole);
  CHECK(j.load().at({"b", 4}) == whole);
  // Parts that do not join (a damaged one) give nothing; the digest check would refuse them anyway.
  j.write_part({"b", 5}, 0, 2, part(0));
  j.write_part({"b", 5}, 1, 2, bytes_of({1, 2}));
  CHECK_FALSE(j.read({"b", 5}).has_value());
  // A whole copy of the delta is what is read; erasing takes the parts too.
  j.write({"b", 6}, bytes_of({7}));
  j.write_part({"b", 6}, 0, 1, whole);
  CHECK(j.read({"b", 6}) == bytes_of({7}));
  j.erase({"b", 6});
  CHECK_FALSE(j.read({"b", 6}).has_value());
  j.erase_through("b", 5);
  CHECK(j.load().empty());
}

}  // namespace

TEST_CASE(
    "delta journal: a delta held in parts comes back whole once every part of one cut is written, in memory and on "
    "disk") {
  MemoryDeltaJournal memory;
  exercise_parts(memory);
  TempDir dir;
  FileDeltaJournal file(dir.path);
  exercise_parts(file);
  // And a part's file is the journal's: another journal over the directory reads it.
  file.write_part({"c", 1}, 0, 1, bytes_of({}));
  CHECK(std::filesystem::exists(dir.path / "c" / "round-000000000001-part-0-of-1.delta"));
}

TEST_CASE("delta journal on disk: a directory it cannot create is an Io error naming it") {
  TempDir dir;
  std::filesystem::create_directories(dir.path);
  std::ofstream(dir.path / "file") << "x";
  try {
    FileDeltaJournal j(dir.path / "file" / "journal");
    FAIL("expected an error");
  } catch (const std::exception& e) {
    CHECK(std::string(e.what()).find("delta journal") != std::string::npos);
  }
}

}  // namespace meridian

namespace meridian {

namespace {

// The commit records a site applied: written, replaced, read back by version, those before a
// version erased.
void exercise_records(DeltaJournal& j) {
  j.write_record(3, "three");
  j.write_record(5, std::string("fi\0ve", 5));
  j.write_record(4, "four");
  j.write_record(4, "four again");
  j.write({"a", 4}, bytes_of({1}));  // a delta of round 4 is not the record of version 4
  CHECK(j.records() ==
        std::map<std::int64_t, std::string>{{3, "three"}, {4, "four again"}, {5, std::string("fi\0ve", 5)}});
  j.erase_records_before(5);
  CHECK(j.records() == std::map<std::int64_t, std::string>{{5, std::string("fi\0ve", 5)}});
  CHECK(j.load().size() == 1);
}

}  // namespace

TEST_CASE("delta journal: the commit records a site applied, in memory and on disk, beside its deltas") {
  MemoryDeltaJournal memory;
  exercise_records(memory);
  TempDir dir;
  {
    FileDeltaJournal file(dir.path);
    exercise_records(file);
    std::ofstream(dir.path / "commit-000000000009.record.tmp") << "partial";
    std::ofstream(dir.path / "commit-x.record") << "bad name";
  }
  FileDeltaJournal again(dir.path);  // a restart reads them back; files it did not write stay unread
  CHECK(again.records().size() == 1);
  again.erase_records_before(100);
  CHECK(again.records().empty());
  CHECK(std::filesystem::exists(dir.path / "commit-x.record"));
}

}  // namespace meridian
