// A site's own deltas as it keeps them for its peers: a window in memory, and its journal behind it.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "crosssite/round/outbox.hpp"

namespace meridian {
namespace {

DeltaAnnouncement announced(std::int64_t round) { return {"a", round, 0, 100, 3, Digest{}}; }

std::vector<std::byte> bytes_of(std::int64_t round) { return std::vector<std::byte>(3, static_cast<std::byte>(round)); }

}  // namespace

TEST_CASE("outbox: a round that left the window is still found while the journal holds it") {
  auto journal = std::make_shared<MemoryDeltaJournal>();
  Outbox outbox("a", journal, 2, true);
  outbox.load(16);
  for (std::int64_t round = 0; round < 5; ++round)
    outbox.keep(announced(round), bytes_of(round), chunk_hashes(bytes_of(round), 16));
  // Rounds 3 and 4 are in memory. No checkpoint holds a version that merged 0-2, so the journal
  // keeps them, and a peer that asks for one gets it, with the link's chunk hashes.
  const Outbox::Delta* old = outbox.find(0);
  REQUIRE(old != nullptr);
  CHECK(*old->bytes == bytes_of(0));
  CHECK(old->hashes == chunk_hashes(bytes_of(0), 16));
  CHECK(outbox.find(4) != nullptr);
  CHECK(outbox.find(7) == nullptr);  // never made

  Outbox forgetful("a", nullptr, 2, false);
  for (std::int64_t round = 0; round < 5; ++round)
    forgetful.keep(announced(round), bytes_of(round), chunk_hashes(bytes_of(round), 16));
  CHECK(forgetful.find(0) == nullptr);  // no journal: the window is all there is
  CHECK(forgetful.find(3) != nullptr);
}

}  // namespace meridian
