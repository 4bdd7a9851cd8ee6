// Whole states between sites, the serving side: one snapshot per peer per re-request period, and a
// sharded state's, put together by its replicas, to every peer waiting for that version.
#include <doctest/doctest.h>

#include <chrono>
#include <vector>

#include "core/model/shard_map.hpp"
#include "crosssite/outer/outer_state.hpp"
#include "crosssite/round/state_transfer.hpp"

using namespace meridian;
using namespace std::chrono_literals;

namespace {

// An outer state at `version`, whole or holding the first half of the model.
OuterState at_version(std::int64_t version, bool sharded) {
  const std::vector<float> initial(2 * kShardUnit, 0.5f);
  OuterState state(initial, {}, {CodecKind::Int8, 256}, true, FragmentPlan{},
                   sharded ? std::optional(ShardRange{0, kShardUnit}) : std::nullopt);
  for (std::int64_t v = 1; v <= version; ++v) state.commit(v, state.preview(std::vector<float>(initial.size(), 0.01f)));
  return state;
}

}  // namespace

TEST_CASE("a whole state is served at once, to each peer once per re-request period") {
  double now = 0;
  StateTransfer transfer([&] { return now; }, 1000ms, 5000ms);
  const OuterState state = at_version(3, false);
  CHECK_FALSE(transfer.answer("p", 1));  // nothing served yet
  transfer.serve(&state);
  CHECK_FALSE(transfer.answer("p", 4));  // newer than held
  const auto first = transfer.answer("p", 2);
  REQUIRE(first);
  CHECK(first->first == 3);
  CHECK(*first->second == state.snapshot());
  CHECK_FALSE(transfer.answer("p", 2));  // asked again too soon
  CHECK(transfer.answer("q", 2));        // another peer
  now = 1.5;
  CHECK(transfer.answer("p", 2));
  CHECK_FALSE(transfer.assembly_wanted());
}

TEST_CASE("a sharded state is served once its replicas put it together, to every peer waiting for that version") {
  double now = 0;
  StateTransfer transfer([&] { return now; }, 1000ms, 5000ms);
  const OuterState part = at_version(5, true);
  transfer.serve(&part);
  CHECK_FALSE(transfer.answer("p", 4));
  CHECK_FALSE(transfer.answer("q", 6));  // a version the site does not hold: not waited for
  CHECK(transfer.assembly_wanted());
  CHECK_FALSE(transfer.answer("r", 5));
  const std::vector<std::byte> snapshot(10, std::byte{7});
  // Put together at version 5: both who asked for 5 or older get it, the same bytes.
  const auto sent = transfer.assembled(5, snapshot);
  REQUIRE(sent.size() == 2);
  CHECK(sent[0].first == "p");
  CHECK(sent[1].first == "r");
  CHECK(sent[0].second == sent[1].second);
  CHECK(*sent[0].second == snapshot);
  CHECK_FALSE(transfer.assembly_wanted());
  // Served: the next request within the period is not answered, nor waited for.
  CHECK_FALSE(transfer.answer("p", 4));
  CHECK_FALSE(transfer.assembly_wanted());
  CHECK(transfer.assembled(5, snapshot).empty());
  // A request waits while the site moves on, and an older assembly does not serve a newer request.
  now = 2;
  CHECK_FALSE(transfer.answer("p", 5));
  CHECK(transfer.assembled(4, snapshot).empty());
  CHECK(transfer.assembly_wanted());
  CHECK(transfer.assembled(5, snapshot).size() == 1);
}
