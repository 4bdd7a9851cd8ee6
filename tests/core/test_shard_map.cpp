// ShardMap: the pure cut of a site's flat buffers among its replicas.
#include <doctest/doctest.h>

#include <cstddef>
#include <numeric>

#include "core/model/shard_map.hpp"
#include "core/util/error.hpp"

using namespace meridian;

namespace {

// Every property the collectives, the hashes and the codecs rely on, for one cut.
void check_cut(std::size_t elements, int ranks, std::size_t unit) {
  CAPTURE(elements);
  CAPTURE(ranks);
  CAPTURE(unit);
  const ShardMap map(elements, ranks, unit);
  REQUIRE(map.ranks() == ranks);
  CHECK(std::accumulate(map.counts().begin(), map.counts().end(), std::size_t{0}) == elements);
  std::size_t next = 0, fewest = map.units(), most = 0;
  for (int r = 0; r < ranks; ++r) {
    const ShardRange part = map.part(r);
    CHECK(part.count == map.counts()[static_cast<std::size_t>(r)]);
    CHECK(part.offset == next);  // in rank order, each element once
    CHECK(part.offset % unit == 0);
    if (part.end() < elements) CHECK(part.count % unit == 0);  // only the last unit is short
    const std::size_t units = (part.count + unit - 1) / unit;
    fewest = std::min(fewest, units);
    most = std::max(most, units);
    for (const std::size_t e : {part.offset, part.offset + part.count / 2, part.end() - 1})
      if (part.count > 0) CHECK(map.owner(e) == r);
    next = part.end();
  }
  CHECK(next == elements);
  CHECK(most - fewest <= 1);
}

}  // namespace

TEST_CASE("a cut covers every element once, in rank order, aligned to units, parts within one unit of each other") {
  for (const std::size_t unit : {std::size_t{1024}, kShardUnit})
    for (const std::size_t elements : {std::size_t{1}, unit - 1, unit, 7 * unit + 5, 123'457 * std::size_t{3}})
      for (int ranks = 1; ranks <= 8; ++ranks) check_cut(elements, ranks, unit);
}

TEST_CASE("one rank owns the whole buffer, and more ranks than units leave some parts empty") {
  const ShardMap whole(10'000, 1);
  CHECK(whole.part(0) == ShardRange{0, 10'000});
  const ShardMap thin(2 * kShardUnit + 3, 5);  // 3 units, 5 ranks
  std::size_t empty = 0;
  for (int r = 0; r < 5; ++r) empty += thin.part(r).count == 0;
  CHECK(empty == 2);
  CHECK(thin.owner(2 * kShardUnit + 2) == 4);  // the short last unit is the last rank's
}

TEST_CASE("a unit that is not a whole number of hash chunks is a bug, not a cut") {
  CHECK_THROWS_AS(ShardMap(100, 2, 1000), InvariantError);
  CHECK_THROWS_AS(ShardMap(100, 0), InvariantError);
}
