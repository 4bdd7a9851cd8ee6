// StampBook: a stamp is filed and taken once; malformed ones are refused; the oldest go first
// once there are more than its capacity.
#include <doctest/doctest.h>

#include "transport/link/stamp_book.hpp"

using namespace meridian;

TEST_CASE("a stamp is taken once, by its peer and transfer id") {
  StampBook book;
  const double sent = 12.5;
  REQUIRE(book.file("p", 7, StampBook::payload(sent)));
  CHECK_FALSE(book.take("q", 7).has_value());
  CHECK_FALSE(book.take("p", 8).has_value());
  CHECK(book.take("p", 7) == 12.5);
  CHECK_FALSE(book.take("p", 7).has_value());
  const std::byte three[3] = {};
  CHECK_FALSE(book.file("p", 9, three));  // not a stamp
  CHECK_FALSE(book.take("p", 9).has_value());
}

TEST_CASE("beyond its capacity the oldest stamps are forgotten, a stamp filed again counts once") {
  StampBook book(3);
  for (std::uint64_t id = 0; id < 5; ++id) {
    const double at = static_cast<double>(id);
    book.file("p", id, StampBook::payload(at));
  }
  CHECK_FALSE(book.take("p", 0).has_value());
  CHECK_FALSE(book.take("p", 1).has_value());
  CHECK(book.take("p", 2) == 2.0);
  CHECK(book.take("p", 4) == 4.0);
  StampBook again(2);
  const double first = 1, second = 2;
  again.file("p", 1, StampBook::payload(first));
  again.file("p", 1, StampBook::payload(second));
  again.file("p", 2, StampBook::payload(first));
  CHECK(again.take("p", 1) == 2.0);  // the newer value, still held: filing it again took no second place
}
