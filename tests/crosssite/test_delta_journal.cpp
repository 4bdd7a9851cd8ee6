// The delta journal: what a site reads back after a restart (its own deltas, and the peers' deltas
// of the versions it proposed or applied), on disk and in the simulator's memory alike.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <unistd.h>

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
