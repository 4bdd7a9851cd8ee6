// Whether a site's copy of its outer state is still the version it holds
// (crosssite/round/held_copy.hpp): version 0 held to the weights the process built, later versions
// to their records, a damaged copy named with both hashes, a sharded part never judged here.
#include <doctest/doctest.h>

#include <vector>

#include "crosssite/round/held_copy.hpp"
#include "tests/support/flipped_bit.hpp"

namespace meridian {
namespace {

constexpr std::size_t kValues = 64;

std::vector<float> initial() {
  std::vector<float> w(kValues);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i % 11) - 0.05f;
  return w;
}

OuterState whole(const std::vector<float>& w) { return OuterState(w, {}, CodecOptions{CodecKind::Fp32}, false); }

}  // namespace

TEST_CASE("held copy: version 0 is held to the weights the process built, and a flipped bit is named") {
  const auto w = initial();
  const HeldCopy copy("a", OuterState::weights_hash(w));
  const OuterState state = whole(w);
  REQUIRE(copy.expected(state) == OuterState::weights_hash(w));
  CHECK(copy.damage(state).empty());
  testing::flip_bit(state, 9);
  const std::string why = copy.damage(state);
  CHECK(why == "site a: its copy of version 0 hashes to " + std::to_string(OuterState::weights_hash(state.global())) +
                   ", its record says " + std::to_string(OuterState::weights_hash(w)));
  // Without the origin's hash nothing says what version 0 is.
  CHECK(HeldCopy("a", std::nullopt).damage(state).empty());
}

TEST_CASE("held copy: a later version is held to its record's hash, and only the version held is judged") {
  const auto w = initial();
  HeldCopy copy("b", OuterState::weights_hash(w));
  OuterState state = whole(w);
  auto outcome = state.preview({0}, std::vector<float>(kValues, 0.01f));
  const std::uint64_t hash = outcome.hash;
  state.commit(1, std::move(outcome));
  CHECK_FALSE(copy.expected(state).has_value());  // version 1 is not held here yet
  copy.hold(1, hash);
  CHECK(copy.expected(state) == hash);
  CHECK(copy.damage(state).empty());
  testing::flip_bit(state, 0);
  CHECK(copy.damage(state).find("site b: its copy of version 1 hashes to ") == 0);
  copy.hold(1, OuterState::weights_hash(state.global()));  // a record that names this copy's hash
  CHECK(copy.damage(state).empty());
}

TEST_CASE("held copy: a sharded part is not judged here, and a divergence lasts until a peer's state is taken") {
  const auto w = initial();
  HeldCopy copy("c", OuterState::weights_hash(w));
  const OuterState part(w, {}, CodecOptions{CodecKind::Fp32}, false, {}, ShardRange{0, kValues / 2});
  REQUIRE(part.sharded());
  CHECK_FALSE(copy.expected(part).has_value());
  CHECK_FALSE(copy.diverged());
  copy.diverge();
  CHECK(copy.diverged());
  copy.replaced();
  CHECK_FALSE(copy.diverged());
}

}  // namespace meridian
