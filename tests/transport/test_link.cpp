// The Link contract, written once and run against every implementation: each case takes a factory
// and is instantiated per link kind at the bottom (UCX will add one line there).
#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "core/util/rng.hpp"
#include "transport/link/link.hpp"
#include "transport/link/zmq_link.hpp"

namespace meridian {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using LinkFactory = std::function<std::unique_ptr<Link>(const LinkFaults&)>;

// Small chunks, so that even modest payloads span many frames.
constexpr std::size_t kChunkBytes = 64 << 10;

std::vector<std::byte> pattern(std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::byte> bytes(n);
  for (auto& b : bytes) b = static_cast<std::byte>(rng.next_u64());
  return bytes;
}

// Receives on `rx` while also serving `others`, whose re-request answers happen inside receive();
// a test that receives on one side only would otherwise wait on a sender that never listens.
std::optional<Received> deliver(Link& rx, std::vector<Link*> others, std::chrono::milliseconds bound = 5s) {
  const auto deadline = Clock::now() + bound;
  while (Clock::now() < deadline) {
    if (auto got = rx.receive(5ms)) return got;
    for (Link* other : others) REQUIRE_FALSE(other->receive(0ms).has_value());
  }
  return std::nullopt;
}

void round_trips_sizes(const LinkFactory& make) {
  auto a = make({});
  auto b = make({});
  std::uint64_t id = 1;
  for (const std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{20} << 20}) {
    for (auto [from, to] : {std::pair{a.get(), b.get()}, std::pair{b.get(), a.get()}}) {
      CAPTURE(size);
      const auto payload = pattern(size, id);
      from->send(to->address(), id, 7, payload);
      const auto got = deliver(*to, {from}, 10s);
      REQUIRE(got.has_value());
      CHECK(got->peer == from->address());
      CHECK(got->transfer_id == id);
      CHECK(got->tag == 7);
      CHECK(got->bytes == payload);
      ++id;
    }
  }
  CHECK(a->counters().rejected == 0);
  CHECK(b->counters().rejected == 0);
  CHECK(a->counters().frames_sent >= 1 + 1 + (20u << 20) / kChunkBytes);
}

void several_in_flight(const LinkFactory& make) {
  auto a = make({});
  auto b = make({});
  std::map<std::uint64_t, std::vector<std::byte>> to_b, to_a;
  for (std::uint64_t id = 1; id <= 8; ++id) {
    to_b[id] = pattern(id * 50'000, id);
    a->send(b->address(), id, static_cast<std::uint16_t>(id), to_b[id]);
    to_a[100 + id] = pattern(id * 30'000, 100 + id);
    b->send(a->address(), 100 + id, 1, to_a[100 + id]);
  }
  for (auto [rx, tx, expected] : {std::tuple{b.get(), a.get(), &to_b}, std::tuple{a.get(), b.get(), &to_a}}) {
    std::map<std::uint64_t, std::vector<std::byte>> got;
    while (got.size() < expected->size()) {
      auto r = rx->receive(5s);
      REQUIRE(r.has_value());
      CHECK(r->peer == tx->address());
      CHECK(got.emplace(r->transfer_id, std::move(r->bytes)).second);
    }
    CHECK(got == *expected);
  }
}

// Sends `n` transfers from a faulty link and checks each arrives once and intact.
Link::Counters survives(const LinkFactory& make, const LinkFaults& faults, int n = 12) {
  auto tx = make(faults);
  auto rx = make({});
  std::map<std::uint64_t, std::vector<std::byte>> sent;
  for (std::uint64_t id = 1; id <= static_cast<std::uint64_t>(n); ++id) {
    sent[id] = pattern(id * 40'000 + 1, id);
    tx->send(rx->address(), id, 3, sent[id]);
  }
  std::map<std::uint64_t, std::vector<std::byte>> got;
  while (got.size() < sent.size()) {
    auto r = deliver(*rx, {tx.get()});
    REQUIRE(r.has_value());
    CHECK(got.emplace(r->transfer_id, std::move(r->bytes)).second);
  }
  CHECK(got == sent);
  CHECK_FALSE(deliver(*rx, {tx.get()}, 200ms).has_value());  // nothing is delivered twice
  return rx->counters();
}

void corrupted_chunks_are_rerequested(const LinkFactory& make) {
  const auto c = survives(make, {.corrupt_probability = 0.3, .seed = 11});
  CHECK(c.rejected > 0);
  CHECK(c.rerequests == c.rejected);
}

void duplicated_chunks_are_delivered_once(const LinkFactory& make) {
  const auto c = survives(make, {.duplicate_probability = 0.4, .seed = 12});
  CHECK(c.duplicates > 0);
  CHECK(c.rejected == 0);
}

void truncated_chunks_are_rerequested(const LinkFactory& make) {
  const auto c = survives(make, {.truncate_probability = 0.3, .seed = 13});
  CHECK(c.rejected > 0);
  CHECK(c.rerequests == c.rejected);
}

void all_faults_at_once(const LinkFactory& make) {
  survives(make, {.corrupt_probability = 0.2, .duplicate_probability = 0.2, .truncate_probability = 0.2, .seed = 14});
}

// send_garbage writes malformed messages to an address in the implementation's own wire protocol
// and says how many.
void garbage_is_refused(const LinkFactory& make, const std::function<std::size_t(const std::string&)>& send_garbage) {
  auto rx = make({});
  const std::size_t sent = send_garbage(rx->address());
  CHECK_FALSE(rx->receive(300ms).has_value());
  CHECK(rx->counters().rejected == sent);
  auto tx = make({});
  const auto payload = pattern(200'000, 5);
  tx->send(rx->address(), 1, 0, payload);
  const auto got = deliver(*rx, {tx.get()});
  REQUIRE(got.has_value());
  CHECK(got->bytes == payload);
}

void receive_times_out(const LinkFactory& make) {
  auto link = make({});
  const auto start = Clock::now();
  CHECK_FALSE(link->receive(200ms).has_value());
  const auto took = Clock::now() - start;
  CHECK(took >= 190ms);
  CHECK(took < 1s);
  CHECK_FALSE(link->receive(0ms).has_value());
}

void run_suite(const LinkFactory& make, const std::function<std::size_t(const std::string&)>& send_garbage) {
  SUBCASE("round trips of 0 B, 1 B and 20 MB both ways") { round_trips_sizes(make); }
  SUBCASE("several transfers in flight both ways") { several_in_flight(make); }
  SUBCASE("corrupted chunks are refused, re-requested, and the transfer arrives") { corrupted_chunks_are_rerequested(make); }
  SUBCASE("duplicated chunks are counted and the transfer is delivered once") { duplicated_chunks_are_delivered_once(make); }
  SUBCASE("truncated chunks are refused and re-requested") { truncated_chunks_are_rerequested(make); }
  SUBCASE("all faults together") { all_faults_at_once(make); }
  SUBCASE("garbage frames are refused and the link keeps working") { garbage_is_refused(make, send_garbage); }
  SUBCASE("receive returns nothing within its bound") { receive_times_out(make); }
}

// Whole messages that are not a chunk or a re-request, from a DEALER that is no link.
std::size_t send_zmq_garbage(const std::string& address) {
  zmq::context_t context(1);
  zmq::socket_t raw(context, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::linger, 1000);
  raw.connect(address);
  const std::vector<std::vector<std::string>> messages = {
      {"junk"}, {"D", "not a header", "payload"}, {"R", "short"}, {"D", "a", "b", "c", "d"}, {"", ""}};
  for (const auto& parts : messages)
    for (std::size_t i = 0; i < parts.size(); ++i)
      REQUIRE(raw.send(zmq::buffer(parts[i]), i + 1 < parts.size() ? zmq::send_flags::sndmore : zmq::send_flags::none));
  return messages.size();
}

TEST_CASE("zmq link") {
  run_suite([](const LinkFaults& f) { return make_zmq_link("127.0.0.1", kChunkBytes, f); }, send_zmq_garbage);
}

}  // namespace
}  // namespace meridian
