// A transfer cut into stripes and put back together: every share in its place whatever the count,
// size or order, and a stripe that lies about itself refused with Error(Peer), never misplaced.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

#include "core/util/error.hpp"
#include "transport/link/stripes.hpp"

namespace meridian {
namespace {

std::vector<std::byte> payload(std::size_t n) {
  std::vector<std::byte> b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>(i * 31 + 7);
  return b;
}

}  // namespace

TEST_CASE("stripes: the shares cover the whole once, differing by at most a byte") {
  for (const std::uint64_t total : {0ull, 1ull, 7ull, 1000ull, 1001ull})
    for (int count = 1; count <= 5; ++count) {
      std::uint64_t at = 0, smallest = total, largest = 0;
      for (int i = 0; i < count; ++i) {
        const auto [first, last] = stripe_bounds(total, i, count);
        CHECK(first == at);
        at = last;
        smallest = std::min(smallest, last - first);
        largest = std::max(largest, last - first);
      }
      CHECK(at == total);
      CHECK(largest - smallest <= 1);
    }
}

TEST_CASE("stripes: put back together in any order, duplicates ignored, from 1 to 5 stripes") {
  for (const std::size_t n : {0u, 3u, 4096u, 10007u})
    for (int count = 1; count <= 5; ++count) {
      const auto whole = payload(n);
      std::vector<std::vector<std::byte>> stripes;
      for (int i = 0; i < count; ++i) stripes.push_back(make_stripe(42, 1, whole, i, count));
      std::vector<int> order(static_cast<std::size_t>(count));
      std::iota(order.rbegin(), order.rend(), 0);  // last first
      StripeAssembler assembler;
      std::optional<Received> done;
      for (std::size_t k = 0; k < order.size(); ++k) {
        const auto& s = stripes[static_cast<std::size_t>(order[k])];
        const Stripe read = read_stripe(s);
        CHECK(read.index == order[k]);
        CHECK(read.count == count);
        CHECK_FALSE(done.has_value());
        done = assembler.add("tcp://a", read);
        if (k == 0 && count > 1) CHECK_FALSE(assembler.add("tcp://a", read).has_value());  // a duplicate
      }
      REQUIRE(done.has_value());
      CHECK(done->peer == "tcp://a");
      CHECK(done->transfer_id == 42);
      CHECK(done->tag == 1);
      CHECK(done->bytes == whole);
      CHECK(assembler.open() == 0);
    }
}

TEST_CASE("stripes: a stripe that is short, damaged, out of its count or not its share is refused") {
  const auto whole = payload(1000);
  auto good = make_stripe(7, 1, whole, 1, 3);
  CHECK_THROWS_AS(read_stripe(std::span<const std::byte>(good).first(3)), Error);
  auto longer = good;
  longer.push_back(std::byte{0});
  CHECK_THROWS_WITH_AS(read_stripe(longer), doctest::Contains("its share is"), Error);
  auto lying = good;
  lying[1] = std::byte{0xFF};  // the header's length, past 256
  CHECK_THROWS_WITH_AS(read_stripe(lying), doctest::Contains("header claims"), Error);
  auto garbage = good;
  for (std::size_t i = 4; i < 40; ++i) garbage[i] = std::byte{0xA5};
  try {
    read_stripe(garbage);
    FAIL("a damaged header was read");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Peer);
  }
}

TEST_CASE("stripes: stripes that disagree drop their transfer, and the open ones are bounded") {
  const auto whole = payload(100);
  StripeAssembler assembler(2, 1000);
  const auto s0 = make_stripe(1, 1, whole, 0, 2);
  const auto other_count = make_stripe(1, 1, whole, 1, 3);
  CHECK_FALSE(assembler.add("a", read_stripe(s0)).has_value());
  CHECK_THROWS_WITH_AS(assembler.add("a", read_stripe(other_count)), doctest::Contains("disagrees"), Error);
  CHECK(assembler.open() == 0);
  // The same id from another sender is another transfer.
  CHECK_FALSE(assembler.add("a", read_stripe(s0)).has_value());
  CHECK_FALSE(assembler.add("b", read_stripe(s0)).has_value());
  CHECK(assembler.open() == 2);
  CHECK_FALSE(assembler.add("c", read_stripe(s0)).has_value());  // the oldest ("a") goes
  CHECK(assembler.open() == 2);
  CHECK(assembler.dropped() == 1);
  CHECK_FALSE(assembler.add("a", read_stripe(make_stripe(1, 1, whole, 1, 2))).has_value());
  const auto big = payload(2000);
  CHECK_THROWS_WITH_AS(assembler.add("d", read_stripe(make_stripe(9, 1, big, 0, 2))),
                       doctest::Contains("more than the 1000 taken"), Error);
}

}  // namespace meridian
