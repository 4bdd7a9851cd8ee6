// DurableJournal: a site's journal lets go of a round only once a version that merged it is in
// the site's checkpoint, whatever window of rounds its callers keep.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "crosssite/round/durable_journal.hpp"

namespace meridian {
namespace {

std::vector<std::int64_t> rounds_of(const DeltaJournal& journal, const std::string& site) {
  std::vector<std::int64_t> out;
  for (const auto& [key, bytes] : journal.load())
    if (key.first == site) out.push_back(key.second);
  return out;
}

void write_rounds(DeltaJournal& journal, const std::string& site, int count) {
  const std::vector<std::byte> bytes(3, std::byte{7});
  for (int round = 0; round < count; ++round) journal.write({site, round}, bytes);
}

}  // namespace

TEST_CASE("durable journal: nothing goes before a checkpoint holds a version that merged it") {
  auto inner = std::make_shared<MemoryDeltaJournal>();
  DurableJournal journal(inner, true);
  write_rounds(journal, "a", 10);
  write_rounds(journal, "b", 10);
  journal.erase_through("a", 7);  // the callers' window says so; no checkpoint yet
  CHECK(rounds_of(*inner, "a").size() == 10);

  journal.merged(3, {{"a", 2}, {"b", 4}});
  journal.merged(4, {{"a", 5}, {"b", 4}});
  journal.merged(6, {{"a", 8}});
  journal.erase_through("a", 7);
  CHECK(rounds_of(*inner, "a").size() == 10);  // merged, but in no checkpoint yet

  journal.durable(4);  // versions 3 and 4 are on disk; 6 is not
  CHECK(journal.floor("a") == 5);
  CHECK(journal.floor("b") == 4);
  CHECK(journal.floor("c") == -1);
  journal.erase_through("a", 7);
  CHECK(rounds_of(*inner, "a") == std::vector<std::int64_t>{6, 7, 8, 9});
  journal.erase_through("b", 2);  // the window is the other bound
  CHECK(rounds_of(*inner, "b") == std::vector<std::int64_t>{3, 4, 5, 6, 7, 8, 9});

  journal.durable(6);
  journal.erase_through("a", 7);
  CHECK(rounds_of(*inner, "a") == std::vector<std::int64_t>{8, 9});
  journal.durable(5);  // an older checkpoint lowers nothing
  CHECK(journal.floor("a") == 8);
}

TEST_CASE("durable journal: a site that writes no checkpoints keeps the callers' window alone") {
  auto inner = std::make_shared<MemoryDeltaJournal>();
  DurableJournal journal(inner, false);
  write_rounds(journal, "a", 10);
  journal.erase_through("a", 6);
  CHECK(rounds_of(*inner, "a") == std::vector<std::int64_t>{7, 8, 9});
  journal.erase({"a", 8});
  CHECK(rounds_of(journal, "a") == std::vector<std::int64_t>{7, 9});
  journal.merged(3, {{"a", 9}});  // noted, but nothing kept for it: it would never be durable
  journal.durable(3);
  CHECK(journal.floor("a") == -1);
}

TEST_CASE(
    "durable journal: a record goes once a checkpoint holds a newer version, or past a window without checkpoints") {
  auto inner = std::make_shared<MemoryDeltaJournal>();
  DurableJournal journal(inner, true);
  for (std::int64_t v = 1; v <= 100; ++v) journal.write_record(v, "r");
  CHECK(inner->records().size() == 100);
  journal.durable(7);  // a restart holds version 7 at least: its record stays
  CHECK(inner->records().begin()->first == 7);
  CHECK(journal.records().size() == 94);

  auto bare = std::make_shared<MemoryDeltaJournal>();
  DurableJournal windowed(bare, false);
  for (std::int64_t v = 1; v <= 100; ++v) windowed.write_record(v, "r");
  CHECK(bare->records().size() == static_cast<std::size_t>(DurableJournal::kRecordsWithoutCheckpoints));
  CHECK(bare->records().rbegin()->first == 100);
}

}  // namespace meridian
