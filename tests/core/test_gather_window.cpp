// What a ZeRO stage-3 gather reaches for, and which ranges count as held.
#include <doctest/doctest.h>

#include "core/train/gather_window.hpp"

using namespace meridian;

TEST_CASE("gather_window: a small range reaches ahead in the pass's direction, within the buffer") {
  // Forward (at or after the previous range): towards the end.
  CHECK(gather_window({10, 5}, 0, 1000, 100) == ShardRange{10, 100});
  CHECK(gather_window({950, 20}, 900, 1000, 100) == ShardRange{950, 50});
  // Backward (before the previous range): towards the start.
  CHECK(gather_window({500, 10}, 800, 1000, 100) == ShardRange{410, 100});
  CHECK(gather_window({20, 10}, 800, 1000, 100) == ShardRange{0, 30});
  // A range as large as the least is gathered as it is.
  CHECK(gather_window({100, 300}, 0, 1000, 100) == ShardRange{100, 300});
}

TEST_CASE("HeldRanges: what is added is covered until removed, piece by piece") {
  HeldRanges held;
  CHECK(held.covers({5, 0}));
  CHECK_FALSE(held.covers({0, 1}));
  held.add({0, 100});
  CHECK(held.covers({10, 20}));
  CHECK_FALSE(held.covers({90, 20}));
  held.add({100, 50});  // adjacent: one interval
  CHECK(held.covers({90, 20}));
  held.remove({40, 10});
  CHECK(held.covers({0, 40}));
  CHECK_FALSE(held.covers({35, 10}));
  CHECK(held.covers({50, 100}));
  held.add({30, 30});  // bridges the hole again
  CHECK(held.covers({0, 150}));
  held.clear();
  CHECK_FALSE(held.covers({0, 1}));
}
