#include <doctest/doctest.h>

#include "core/util/error.hpp"
#include "sim/des/event_queue.hpp"

using namespace meridian;
using namespace meridian::sim;

TEST_CASE("events come out by time, ties in the order they were scheduled, and the clock follows") {
  EventQueue q;
  q.schedule({.t = 3, .kind = 1});
  q.schedule({.t = 1, .kind = 2});
  q.schedule({.t = 3, .kind = 3});
  q.schedule({.t = 1, .kind = 4});
  q.schedule({.t = 2, .kind = 5});
  std::vector<int> kinds;
  std::vector<double> times;
  while (!q.empty()) {
    const Event e = q.pop();
    kinds.push_back(e.kind);
    times.push_back(q.now());
  }
  CHECK(kinds == std::vector<int>{2, 4, 5, 1, 3});
  CHECK(times == std::vector<double>{1, 1, 2, 3, 3});
  CHECK(q.scheduled() == 5);
}

TEST_CASE("an event scheduled in the past or a pop from an empty queue is a bug, caught") {
  EventQueue q;
  q.schedule({.t = 5});
  q.pop();
  CHECK_THROWS_AS(q.schedule({.t = 4}), InvariantError);
  CHECK_THROWS_AS(q.pop(), InvariantError);
  q.schedule({.t = 5});  // the present is fine
  CHECK(q.pop().t == 5);
}

TEST_CASE("the same schedule gives the same order, whatever else was queued before") {
  const auto run = [](int extra) {
    EventQueue q;
    for (int i = 0; i < extra; ++i) q.schedule({.t = 100.0 + i});
    for (int i = 0; i < 50; ++i) q.schedule({.t = static_cast<double>((i * 7) % 5), .kind = i});
    std::vector<int> order;
    for (int i = 0; i < 50; ++i) order.push_back(q.pop().kind);
    return order;
  };
  CHECK(run(0) == run(10));
}
