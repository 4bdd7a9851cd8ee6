// The split exchange's links: a leader's StripedLink and its replicas' Lanes, over the simulated
// network. A delta leaves in as many stripes as the two sites have lanes in common, each lane
// carrying its share, and arrives whole at the peer's leader as from the peer's own address; what
// is not striped, or cannot be, goes whole.
#include <doctest/doctest.h>

#include "transport/chunking/chunker.hpp"
#include "transport/link/lane.hpp"
#include "transport/link/sim_link.hpp"
#include "transport/link/striped_link.hpp"

namespace meridian {
namespace {

constexpr std::uint16_t kDelta = 1, kOther = 2, kStripe = 6;

std::shared_ptr<const std::vector<std::byte>> payload(std::size_t n, int seed = 1) {
  auto b = std::make_shared<std::vector<std::byte>>(n);
  for (std::size_t i = 0; i < n; ++i) (*b)[i] = static_cast<std::byte>(i * 13 + static_cast<std::size_t>(seed));
  return b;
}

// One site: a leader's striped link and `lanes` replicas' lanes, at sim://<name>/<rank>.
struct Site {
  std::unique_ptr<StripedLink> leader;
  std::vector<std::unique_ptr<Lane>> lanes;

  // With `parts`, a peer that takes parts gets them: here a part is the byte share of its index
  // (the sites layer cuts on the codec's units), and a replica keeps its part's bytes as its report.
  Site(SimNetwork& net, const std::string& name, int lanes_count, bool parts = false) {
    StripedLink::Options o{kStripe, [](std::uint64_t id, std::uint16_t tag) { return tag == kDelta && id % 2 == 0; }};
    CutPart cut;
    if (parts) {
      cut = [](std::span<const std::byte> whole, int index, int count, std::uint64_t unit) {
        CHECK(unit == 4096);
        const auto [first, last] = stripe_bounds(whole.size(), index, count);
        const auto share = whole.subspan(first, last - first);
        return std::vector<std::byte>(share.begin(), share.end());
      };
      o.cuts = [](std::uint64_t unit) { return unit % 4096 == 0; };
      o.cut_part = cut;
      o.keep_part = [](const std::string&, const Stripe& s) {
        return std::optional(std::vector<std::byte>(s.bytes.begin(), s.bytes.end()));
      };
    }
    leader = std::make_unique<StripedLink>(net.open("sim://" + name + "/0"), o);
    for (int i = 1; i <= lanes_count; ++i)
      lanes.push_back(std::make_unique<Lane>(net.open("sim://" + name + "/" + std::to_string(i)), kStripe, cut));
    leader->set_lanes(lanes_count);
  }
  std::vector<std::string> lane_addresses() const {
    std::vector<std::string> out;
    for (const auto& l : lanes) out.push_back(l->address());
    return out;
  }
  // Every replica holds what the site sends.
  void hold(const std::shared_ptr<const std::vector<std::byte>>& p) {
    for (auto& l : lanes) l->hold(p);
  }
  // One round of the site's collective: orders carried out, stripes taken to the leader.
  void sync() {
    for (const auto& o : leader->take_orders()) lanes[static_cast<std::size_t>(o.lane - 1)]->carry(o);
    for (auto& l : lanes)
      for (auto& [from, bytes] : l->take_stripes()) {
        const Stripe s = read_stripe(bytes);
        if (s.part)
          leader->feed_report(from, s.transfer_id, s.tag, s.index, s.count, {s.bytes.begin(), s.bytes.end()});
        else
          leader->feed(from, bytes);
      }
  }
};

std::optional<Received> deliver(ManualClock& clock, Site& from, Site& to) {
  for (int tick = 0; tick < 100; ++tick) {
    from.sync();
    to.sync();
    if (auto r = to.leader->receive(std::chrono::milliseconds(0))) return r;
    clock.advance(0.01);
  }
  return std::nullopt;
}

// A network with 50 ms of latency and nothing else: whatever goes wrong is the links' doing.
const SimNetworkOptions kQuiet{0.05, 0, 1e9, 0, 0, 0};

// A delta's first send (an even id), with the chunk hashes its encoder takes.
void send_delta(Site& from, const Site& to, std::uint64_t id, const std::shared_ptr<const std::vector<std::byte>>& delta) {
  from.leader->send(to.leader->address(), id, kDelta, delta, chunk_hashes(*delta, from.leader->chunk_bytes()));
}

void introduce(Site& a, Site& b) {
  a.leader->set_peer_lanes({{b.leader->address(), PeerLanes{b.lane_addresses()}}});
  b.leader->set_peer_lanes({{a.leader->address(), PeerLanes{a.lane_addresses()}}});
}

}  // namespace

TEST_CASE("striped link: a delta between sites of 3 replicas goes in 3 stripes, a third on each lane") {
  ManualClock clock;
  SimNetwork net(clock, 1, kQuiet);
  Site a(net, "a", 2), b(net, "b", 2);
  introduce(a, b);
  const auto delta = payload(300000);
  a.hold(delta);
  send_delta(a, b, 10, delta);
  const auto r = deliver(clock, a, b);
  REQUIRE(r.has_value());
  CHECK(r->peer == a.leader->address());
  CHECK(r->transfer_id == 10);
  CHECK(r->tag == kDelta);
  CHECK(r->bytes == *delta);
  CHECK(a.leader->figures().striped_sends == 1);
  CHECK(b.leader->figures().assembled == 1);
  // Each of the sending site's replicas put a third of the delta on the wire, and no more.
  const auto third = delta->size() / 3;
  CHECK(a.leader->counters().bytes_sent >= third);
  CHECK(a.leader->counters().bytes_sent < third + 100);
  for (const auto& lane : a.lanes) {
    CHECK(lane->figures().stripes_sent == 1);
    CHECK(lane->figures().bytes_sent >= third);
    CHECK(lane->figures().bytes_sent < third + 100);
  }
  for (const auto& lane : b.lanes) CHECK(lane->figures().stripes_received == 1);
}

TEST_CASE("striped link: sites of different replica counts send on as many flows as the larger has") {
  ManualClock clock;
  SimNetwork net(clock, 2, kQuiet);
  Site a(net, "a", 3), b(net, "b", 1);
  introduce(a, b);
  const auto from_a = payload(5000, 3), from_b = payload(7001, 4);
  a.hold(from_a);
  b.hold(from_b);
  send_delta(a, b, 2, from_a);
  send_delta(b, a, 4, from_b);
  const auto at_b = deliver(clock, a, b);
  const auto at_a = deliver(clock, b, a);
  REQUIRE(at_b.has_value());
  REQUIRE(at_a.has_value());
  CHECK(at_b->bytes == *from_a);
  CHECK(at_a->bytes == *from_b);
  // 4 senders to 2 receivers: 4 stripes, one per sender, on 4 distinct (sender, receiver) pairs.
  for (const auto& lane : a.lanes) CHECK(lane->figures().stripes_sent == 1);
  CHECK(b.lanes[0]->figures().stripes_received == 2);  // from a's replicas 1 and 3
  // 2 senders to 4 receivers: 4 stripes, each of a's lanes gets one (from b's leader or replica 1).
  CHECK(b.lanes[0]->figures().stripes_sent == 2);
  for (const auto& lane : a.lanes) CHECK(lane->figures().stripes_received == 1);
  CHECK(a.leader->figures().stripes_in == 4);
}

TEST_CASE(
    "striped link: a peer that takes parts gets part i on its replica i, and holds the delta in parts, never whole") {
  ManualClock clock;
  SimNetwork net(clock, 4, kQuiet);
  Site a(net, "a", 1, true), b(net, "b", 2, true);
  a.leader->set_peer_lanes({{b.leader->address(), PeerLanes{b.lane_addresses(), 4096}}});
  b.leader->set_peer_lanes({{a.leader->address(), PeerLanes{a.lane_addresses()}}});
  const auto delta = payload(30000);
  a.hold(delta);
  send_delta(a, b, 6, delta);
  std::vector<HeldParts> held;
  for (int tick = 0; tick < 100 && held.empty(); ++tick) {
    a.sync();
    b.sync();
    CHECK_FALSE(b.leader->receive(std::chrono::milliseconds(0)).has_value());  // never put together
    held = b.leader->take_held();
    clock.advance(0.01);
  }
  REQUIRE(held.size() == 1);
  CHECK(held[0].owner == a.leader->address());
  CHECK(held[0].transfer_id == 6);
  CHECK(held[0].tag == kDelta);
  // Three parts for b's three replicas, from a's two senders (part 2 from a's leader again).
  REQUIRE(held[0].reports.size() == 3);
  std::vector<std::byte> joined;
  for (const auto& r : held[0].reports) joined.insert(joined.end(), r.begin(), r.end());
  CHECK(joined == *delta);
  CHECK(a.leader->figures().parts_sent == 1);
  CHECK(a.leader->figures().striped_sends == 0);
  CHECK(a.lanes[0]->figures().stripes_sent == 1);
  CHECK(b.leader->figures().held_in_parts == 1);
  CHECK(b.leader->figures().parts_in == 3);
  CHECK(b.leader->figures().assembled == 0);
  // A report twice, or of a part out of its count, is refused; a unit this site cannot cut on, or
  // a re-send, gets byte stripes or the whole as before.
  b.leader->feed_report(a.leader->address(), 8, kDelta, 0, 3, {std::byte{1}});
  b.leader->feed_report(a.leader->address(), 8, kDelta, 0, 3, {std::byte{1}});
  b.leader->feed_report(a.leader->address(), 8, kDelta, 5, 3, {std::byte{1}});
  CHECK(b.leader->figures().parts_refused == 2);
  a.leader->set_peer_lanes({{b.leader->address(), PeerLanes{b.lane_addresses(), 1000}}});
  send_delta(a, b, 10, delta);
  const auto whole = deliver(clock, a, b);
  REQUIRE(whole.has_value());
  CHECK(whole->bytes == *delta);
  CHECK(a.leader->figures().striped_sends == 1);
}

// Found by the protocol simulator's replica deaths: a transfer whose parts were all reported
// just before its site's group re-formed was handed to CrossSite after the re-formation, held in
// parts by a site of one replica left, which holds its state whole.
TEST_CASE("striped link: a re-formed group forgets the parts reported, and the transfers held in parts not taken yet") {
  ManualClock clock;
  SimNetwork net(clock, 4, kQuiet);
  Site a(net, "a", 1, true), b(net, "b", 2, true);
  b.leader->set_peer_lanes({{a.leader->address(), PeerLanes{a.lane_addresses()}}});
  b.leader->feed_report(a.leader->address(), 8, kDelta, 0, 2, {std::byte{1}});  // waits for part 1
  b.leader->feed_report(a.leader->address(), 9, kDelta, 0, 1, {std::byte{1}});  // all its parts: held
  CHECK(b.leader->figures().held_in_parts == 1);
  b.leader->forget_parts();
  CHECK(b.leader->take_held().empty());
  b.leader->feed_report(a.leader->address(), 8, kDelta, 1, 2, {std::byte{1}});  // completes nothing now
  CHECK(b.leader->take_held().empty());
}

TEST_CASE("striped link: re-sends, other tags and peers without lanes go whole") {
  ManualClock clock;
  SimNetwork net(clock, 3, kQuiet);
  Site a(net, "a", 2), b(net, "b", 2);
  const auto delta = payload(4000);
  a.hold(delta);
  // b lists no lanes at a yet.
  send_delta(a, b, 0, delta);
  introduce(a, b);
  send_delta(a, b, 1, delta);  // a re-send
  a.leader->send(b.leader->address(), 2, kOther, delta);
  CHECK(a.leader->take_orders().empty());
  CHECK(a.leader->figures().striped_sends == 0);
  int got = 0;
  for (int tick = 0; tick < 50 && got < 3; ++tick, clock.advance(0.01))
    while (auto r = b.leader->receive(std::chrono::milliseconds(0))) {
      CHECK(r->bytes == *delta);
      ++got;
    }
  CHECK(got == 3);
}

TEST_CASE("striped link: a lane without the payload sends nothing, and stray stripes are refused") {
  ManualClock clock;
  SimNetwork net(clock, 4, kQuiet);
  Site a(net, "a", 1), b(net, "b", 1);
  introduce(a, b);
  const auto delta = payload(4000);
  // a's lane never held it (a replica that joined after the encode): the whole never completes,
  // and the peer's protocol asks again for it.
  send_delta(a, b, 0, delta);
  CHECK_FALSE(deliver(clock, a, b).has_value());
  CHECK(a.lanes[0]->figures().missing == 1);
  // A stripe fed from an address that is no peer's lane, and garbage from a peer's lane.
  b.leader->feed("sim://stranger", make_stripe(5, kDelta, *delta, 1, 2));
  b.leader->feed(a.lanes[0]->address(), std::vector<std::byte>(10, std::byte{1}));
  CHECK(b.leader->figures().refused == 2);
}

}  // namespace meridian
