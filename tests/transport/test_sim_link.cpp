// The simulated network behind Link: transfers arrive whole after their latency on the virtual
// clock, or are lost, duplicated, corrupted, cut off by a partition, or dropped at a full queue,
// all from the seed.
#include <doctest/doctest.h>

#include <algorithm>
#include <tuple>

#include "transport/link/sim_link.hpp"

namespace meridian {
namespace {

std::vector<std::byte> payload(std::size_t n) {
  std::vector<std::byte> b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>(i * 7);
  return b;
}

}  // namespace

TEST_CASE("sim link: a transfer arrives after its latency, not before, whole and from its sender") {
  ManualClock clock;
  SimNetwork net(clock, 1, SimNetworkOptions{0.1, 0, 1e9, 0, 0, 0});
  auto a = net.open("sim://a");
  auto b = net.open("sim://b");
  a->send("sim://b", 77, 3, std::span<const std::byte>(payload(100)));
  clock.advance(0.099);
  CHECK_FALSE(b->receive(std::chrono::milliseconds(0)).has_value());
  clock.advance(0.002);
  const auto r = b->receive(std::chrono::milliseconds(0));
  REQUIRE(r.has_value());
  CHECK(r->peer == "sim://a");
  CHECK(r->transfer_id == 77);
  CHECK(r->tag == 3);
  CHECK(r->bytes == payload(100));
  CHECK_FALSE(b->receive(std::chrono::milliseconds(0)).has_value());
  CHECK(a->counters().bytes_sent == 100);
}

TEST_CASE("sim link: a partition drops what crosses it, and a reopened address starts empty") {
  ManualClock clock;
  SimNetwork net(clock, 1, SimNetworkOptions{0.01, 0, 1e9, 0, 0, 0});
  auto a = net.open("sim://a");
  auto b = net.open("sim://b");
  net.isolate("sim://b", true);
  a->send("sim://b", 1, 1, std::span<const std::byte>(payload(10)));
  net.isolate("sim://b", false);
  clock.advance(1);
  CHECK_FALSE(b->receive(std::chrono::milliseconds(0)).has_value());
  CHECK(net.counters().partitioned == 1);
  a->send("sim://b", 2, 1, std::span<const std::byte>(payload(10)));
  b.reset();
  b = net.open("sim://b");  // a restarted process: what was on its way to the old one is gone
  clock.advance(1);
  CHECK_FALSE(b->receive(std::chrono::milliseconds(0)).has_value());
}

TEST_CASE("sim link: past its queue at a receiver that takes nothing, a sender's transfers are dropped") {
  ManualClock clock;
  SimNetworkOptions options{0.01, 0, 1e9, 0, 0, 0};
  options.queue_transfers = 3;
  SimNetwork net(clock, 1, options);
  auto a = net.open("sim://a");
  auto b = net.open("sim://b");
  auto c = net.open("sim://c");
  for (std::uint64_t i = 0; i < 5; ++i) a->send("sim://c", i, 1, std::span<const std::byte>(payload(8)));
  c->send("sim://a", 9, 1, std::span<const std::byte>(payload(8)));  // the queue is per sender and receiver
  b->send("sim://c", 7, 1, std::span<const std::byte>(payload(8)));
  clock.advance(1);
  CHECK(net.counters().overflowed == 2);
  std::vector<std::uint64_t> ids;
  while (auto r = c->receive(std::chrono::milliseconds(0))) ids.push_back(r->transfer_id);
  CHECK(ids == std::vector<std::uint64_t>{0, 1, 2, 7});
  CHECK(a->receive(std::chrono::milliseconds(0)).has_value());
  // Taken, the queue has room again.
  a->send("sim://c", 5, 1, std::span<const std::byte>(payload(8)));
  clock.advance(1);
  const auto r = c->receive(std::chrono::milliseconds(0));
  REQUIRE(r.has_value());
  CHECK(r->transfer_id == 5);
  CHECK(net.counters().overflowed == 2);
}

TEST_CASE("sim link: loss, duplication and corruption at the rates asked, the same for the same seed") {
  const auto run = [](std::uint64_t seed) {
    ManualClock clock;
    SimNetwork net(clock, seed, SimNetworkOptions{0.01, 0.05, 1e9, 0.2, 0.2, 0.2, 4000});
    auto a = net.open("sim://a");
    auto b = net.open("sim://b");
    for (std::uint64_t i = 0; i < 2000; ++i) a->send("sim://b", i, 1, std::span<const std::byte>(payload(64)));
    clock.advance(1);
    std::vector<std::uint64_t> ids;
    int damaged = 0;
    while (auto r = b->receive(std::chrono::milliseconds(0))) {
      ids.push_back(r->transfer_id);
      damaged += r->bytes != payload(64);
    }
    return std::tuple(ids, damaged, net.counters().lost, net.counters().duplicated);
  };
  const auto [ids, damaged, lost, duplicated] = run(5);
  CHECK(lost > 300);
  CHECK(lost < 500);
  CHECK(duplicated > 250);
  CHECK(damaged > 250);
  CHECK(ids.size() == 2000 - lost + duplicated);
  CHECK_FALSE(std::is_sorted(ids.begin(), ids.end()));  // jitter reorders
  CHECK(run(5) == run(5));
  CHECK(std::get<0>(run(6)) != ids);
}

}  // namespace meridian
