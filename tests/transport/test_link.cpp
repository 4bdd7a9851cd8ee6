// The Link contract, written once and run against every implementation: each case takes a factory
// and is instantiated per link kind at the bottom.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <netinet/in.h>
#include <ucp/api/ucp.h>
#include <zmq.hpp>

#include "core/util/error.hpp"
#include "core/util/rng.hpp"
#include "transport/chunking/assembler.hpp"
#include "transport/chunking/chunker.hpp"
#include "transport/link/curve.hpp"
#include "transport/link/faults.hpp"
#include "transport/link/incoming.hpp"
#include "transport/link/link.hpp"
#include "transport/link/peer_gate.hpp"
#include "transport/link/ucx_link.hpp"
#include "transport/link/ucx_transport.hpp"
#include "transport/link/zmq_link.hpp"

namespace meridian {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
// Small chunks, so that even modest payloads span many frames.
constexpr std::size_t kChunkBytes = 64 << 10;

// Makes a link of the kind under test, with these faults and chunk size.
struct LinkFactory {
  std::function<std::unique_ptr<Link>(const LinkFaults&, std::size_t chunk_bytes)> make;
  std::unique_ptr<Link> operator()(const LinkFaults& faults, std::size_t chunk_bytes = kChunkBytes) const {
    return make(faults, chunk_bytes);
  }
};

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
  rx->set_peers({tx->address()}, nullptr);  // re-requests go to listed peers only
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

// Each of the four faults with probability p per frame.
LinkFaults every_fault(double p, std::uint64_t seed) {
  return {.corrupt_probability = p, .duplicate_probability = p, .truncate_probability = p, .reorder_probability = p,
          .seed = seed};
}

// Transfers of many small chunks from a link that corrupts, duplicates, truncates and reorders its
// own frames (re-sent ones too), round after round until at least 1,000 faults were injected: each
// transfer arrives once and intact, and the receiver saw damage and duplicates. Seeded: the faults
// are drawn frame by frame in the order the sender puts frames out.
void a_thousand_faults(const LinkFactory& make) {
  constexpr std::size_t kSmallChunks = 4 << 10;
  auto tx = make(every_fault(0.08, 16), kSmallChunks);
  auto rx = make({}, kSmallChunks);
  rx->set_peers({tx->address()}, nullptr);
  std::map<std::uint64_t, std::vector<std::byte>> sent;
  std::set<std::uint64_t> delivered;
  std::uint64_t id = 0;
  Rng sizes(17);
  while (tx->counters().faults_injected < 1000) {
    REQUIRE(id < 2000);  // the faults stopped coming: a link that no longer applies them
    std::set<std::uint64_t> round;
    for (int i = 0; i < 8; ++i) {
      ++id;
      sent[id] = pattern(kSmallChunks * (2 + sizes.below(14)) + sizes.below(kSmallChunks), id);  // 3 to 16 chunks
      tx->send(rx->address(), id, 5, sent[id]);
      round.insert(id);
    }
    while (!round.empty()) {
      auto got = deliver(*rx, {tx.get()});
      REQUIRE(got.has_value());
      CHECK(got->peer == tx->address());
      CHECK(got->tag == 5);
      REQUIRE(sent.count(got->transfer_id) == 1);
      CHECK(got->bytes == sent[got->transfer_id]);  // never a damaged transfer
      CHECK(delivered.insert(got->transfer_id).second);  // never one twice
      round.erase(got->transfer_id);
      rx->recycle(std::move(got->bytes));
    }
  }
  CHECK_FALSE(deliver(*rx, {tx.get()}, 200ms).has_value());  // nothing late, nothing twice
  CHECK(delivered.size() == sent.size());
  const auto t = tx->counters();
  const auto r = rx->counters();
  CHECK(t.faults_injected == t.corrupted + t.duplicated + t.truncated + t.reordered);
  CHECK(t.faults_injected >= 1000);
  CHECK(t.corrupted > 0);
  CHECK(t.duplicated > 0);
  CHECK(t.truncated > 0);
  CHECK(t.reordered > 0);
  CHECK(r.rejected > 0);
  CHECK(r.duplicates > 0);
  CHECK(r.rerequests > 0);
  MESSAGE(sent.size(), " transfers, ", t.frames_sent, " frames sent, faults injected: ", t.faults_injected, " (",
          t.corrupted, " corrupted, ", t.duplicated, " duplicated, ", t.truncated, " truncated, ", t.reordered,
          " reordered); receiver: ", r.rejected, " rejected, ", r.duplicates, " duplicates, ", r.rerequests,
          " re-requests");
}

// Large payloads handed over shared from a faulty link: each arrives once and intact, the link
// keeping the caller's buffer for re-requests. Without their hashes the UCX link sends their
// chunks' payloads ahead of their headers, while it hashes them; `prehashed`: with the hashes
// taken where they were made (as CrossSite's deltas are), sent at once without being read.
void large_shared_payloads_survive_faults(const LinkFactory& make, bool prehashed) {
  constexpr std::size_t kLargeChunks = 1 << 20;
  auto tx = make(every_fault(0.1, prehashed ? 19 : 18), kLargeChunks);
  auto rx = make({}, kLargeChunks);
  rx->set_peers({tx->address()}, nullptr);
  REQUIRE(tx->chunk_bytes() == kLargeChunks);
  std::map<std::uint64_t, std::shared_ptr<const std::vector<std::byte>>> sent;
  for (std::uint64_t id = 1; id <= 3; ++id) {
    sent[id] = std::make_shared<const std::vector<std::byte>>(pattern((16 << 20) + id * 1'234'567, id));
    if (prehashed)
      tx->send(rx->address(), id, 9, sent[id], chunk_hashes(*sent[id], tx->chunk_bytes()));
    else
      tx->send(rx->address(), id, 9, sent[id]);
    CHECK(sent[id].use_count() >= 2);  // kept by the link, not copied
  }
  std::set<std::uint64_t> got;
  while (got.size() < sent.size()) {
    auto r = deliver(*rx, {tx.get()}, 20s);
    REQUIRE(r.has_value());
    REQUIRE(sent.count(r->transfer_id) == 1);
    CHECK(r->tag == 9);
    CHECK(r->bytes == *sent[r->transfer_id]);
    CHECK(got.insert(r->transfer_id).second);
  }
  CHECK_FALSE(deliver(*rx, {tx.get()}, 200ms).has_value());
  CHECK(rx->counters().rejected > 0);
  CHECK(rx->counters().rerequests > 0);
  CHECK(tx->counters().faults_injected > 0);
}

// A wrong precomputed hash is the receiver's to catch: that chunk is refused (re-requested, and
// refused again, since its sender can only send it with the same header) and the transfer is never
// delivered; the link goes on delivering others. Hashes for another chunk size are a caller bug.
void a_wrong_precomputed_hash_is_caught(const LinkFactory& make) {
  auto tx = make({});
  auto rx = make({});
  rx->set_peers({tx->address()}, nullptr);
  const auto payload = std::make_shared<const std::vector<std::byte>>(pattern(20 * kChunkBytes + 5, 30));
  ChunkHashes wrong = chunk_hashes(*payload, tx->chunk_bytes());
  wrong.hashes[7] ^= std::uint64_t{1} << 40;
  tx->send(rx->address(), 1, 2, payload, wrong);
  CHECK_FALSE(deliver(*rx, {tx.get()}, 500ms).has_value());
  CHECK(rx->counters().rejected > 0);
  CHECK(rx->counters().rerequests > 0);
  CHECK_THROWS_AS(tx->send(rx->address(), 2, 2, payload, chunk_hashes(*payload, 2 * kChunkBytes)), InvariantError);
  tx->send(rx->address(), 3, 2, payload, chunk_hashes(*payload, tx->chunk_bytes()));
  const auto got = deliver(*rx, {tx.get()});
  REQUIRE(got.has_value());
  CHECK(got->transfer_id == 3);
  CHECK(got->bytes == *payload);
}

// send_garbage writes malformed messages to an address in the implementation's own wire protocol
// and says how many.
// The shared form: both peers get the same buffer's frames, re-requests (corruption) are answered
// from it, and the link holds on to it rather than to a copy.
void shared_payloads_are_sent_and_kept(const LinkFactory& make) {
  auto tx = make({.corrupt_probability = 0.3, .seed = 15});
  auto rx1 = make({});
  auto rx2 = make({});
  rx1->set_peers({tx->address()}, nullptr);
  rx2->set_peers({tx->address()}, nullptr);
  const auto payload = std::make_shared<const std::vector<std::byte>>(pattern(3'000'001, 15));
  tx->send(rx1->address(), 1, 4, payload);
  tx->send(rx2->address(), 1, 4, payload);
  CHECK(payload.use_count() >= 3);  // ours and the link's two kept transfers
  for (Link* rx : {rx1.get(), rx2.get()}) {
    const auto got = deliver(*rx, {tx.get()});
    REQUIRE(got.has_value());
    CHECK(got->transfer_id == 1);
    CHECK(got->tag == 4);
    CHECK(got->bytes == *payload);
    CHECK(rx->counters().rerequests == rx->counters().rejected);
  }
  CHECK(rx1->counters().rejected + rx2->counters().rejected > 0);
}

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

// A peer that takes nothing (gone, its address left behind) never makes a send wait: past the
// link's bound its frames are dropped, and the link goes on working with the others. 1,500
// small transfers are more messages than ZeroMQ's default queue for one peer (1,000), which the
// link's first bound was and which made the 1,001st send wait 30 s.
void a_peer_that_takes_nothing_never_holds_sends(const LinkFactory& make) {
  auto a = make({});
  auto b = make({});
  const std::string gone = make({})->address();
  const auto payload = pattern(1000, 6);
  constexpr std::uint64_t kTransfers = 1500;
  for (std::uint64_t id = 1; id <= kTransfers; ++id) a->send(gone, id, 0, payload);
  const auto c = a->counters();
  CHECK(c.frames_sent + c.dropped == kTransfers);
  a->send(b->address(), kTransfers + 1, 0, payload);
  const auto got = deliver(*b, {a.get()});
  REQUIRE(got.has_value());
  CHECK(got->bytes == payload);
}

// A receiver that lists its peers takes transfers from them only: a stranger's frames are refused
// and counted by its name (test_peer_gate has the forged names of issue 17).
void only_listed_peers_are_taken_in(const LinkFactory& make) {
  auto member = make({});
  auto stranger = make({});
  auto rx = make({});
  const auto payload = pattern(100'000, 8);
  stranger->send(rx->address(), 1, 0, payload);
  auto got = deliver(*rx, {stranger.get()});  // no list yet: anyone
  REQUIRE(got.has_value());
  CHECK(got->peer == stranger->address());

  rx->set_peers({member->address()}, nullptr);
  stranger->send(rx->address(), 2, 0, payload);
  CHECK_FALSE(deliver(*rx, {stranger.get()}, 300ms).has_value());
  CHECK(rx->counters().strangers > 0);
  const auto refused = rx->take_refusals();
  REQUIRE(refused.size() == 1);
  CHECK(refused.begin()->first == printable_name(stranger->address()));
  CHECK(refused.begin()->second == rx->counters().strangers);
  CHECK(rx->take_refusals().empty());

  member->send(rx->address(), 3, 0, payload);
  got = deliver(*rx, {member.get()});
  REQUIRE(got.has_value());
  CHECK(got->peer == member->address());
  CHECK(got->bytes == payload);
}

void recycled_buffers_are_reused(const LinkFactory& make) {
  auto a = make({});
  auto b = make({});
  const auto first = pattern(3 << 20, 1);
  a->send(b->address(), 1, 0, first);
  auto got = deliver(*b, {a.get()});
  REQUIRE(got.has_value());
  const std::byte* memory = got->bytes.data();
  b->recycle(std::move(got->bytes));
  const auto second = pattern(2 << 20, 2);  // smaller: fits the recycled buffer
  a->send(b->address(), 2, 0, second);
  got = deliver(*b, {a.get()});
  REQUIRE(got.has_value());
  CHECK(got->bytes == second);
  CHECK(got->bytes.data() == memory);
}

// A loopback port nobody listens on right now.
std::uint16_t unused_port() {
  zmq::context_t context(1);
  zmq::socket_t probe(context, zmq::socket_type::router);
  probe.bind("tcp://127.0.0.1:*");
  const std::string endpoint = probe.get(zmq::sockopt::last_endpoint);
  return static_cast<std::uint16_t>(std::stoi(endpoint.substr(endpoint.rfind(':') + 1)));
}

using PortedFactory = std::function<std::unique_ptr<Link>(std::uint16_t)>;

void binds_the_port_it_is_given(const PortedFactory& make) {
  const std::uint16_t port = unused_port();
  auto fixed = make(port);
  CHECK(fixed->address().ends_with(std::string(":").append(std::to_string(port))));
  auto other = make(0);
  const auto payload = pattern(100'000, 3);
  other->send(fixed->address(), 1, 0, payload);
  const auto got = deliver(*fixed, {other.get()});
  REQUIRE(got.has_value());
  CHECK(got->bytes == payload);
  CHECK_THROWS_AS(make(port), Error);  // taken: refused with an Io error, not a crash
}

void run_suite(const LinkFactory& make, const std::function<std::size_t(const std::string&)>& send_garbage) {
  SUBCASE("round trips of 0 B, 1 B and 20 MB both ways") { round_trips_sizes(make); }
  SUBCASE("several transfers in flight both ways") { several_in_flight(make); }
  SUBCASE("corrupted chunks are refused, re-requested, and the transfer arrives") { corrupted_chunks_are_rerequested(make); }
  SUBCASE("duplicated chunks are counted and the transfer is delivered once") { duplicated_chunks_are_delivered_once(make); }
  SUBCASE("truncated chunks are refused and re-requested") { truncated_chunks_are_rerequested(make); }
  SUBCASE("all faults together") { all_faults_at_once(make); }
  SUBCASE("a thousand faults of all four kinds: every transfer once and intact") { a_thousand_faults(make); }
  SUBCASE("large shared payloads arrive intact through all four faults") { large_shared_payloads_survive_faults(make, false); }
  SUBCASE("a shared payload is sent to two peers and re-requested from") { shared_payloads_are_sent_and_kept(make); }
  SUBCASE("pre-hashed payloads arrive intact through all four faults") { large_shared_payloads_survive_faults(make, true); }
  SUBCASE("a wrong precomputed chunk hash is refused, never delivered") { a_wrong_precomputed_hash_is_caught(make); }
  SUBCASE("garbage frames are refused and the link keeps working") { garbage_is_refused(make, send_garbage); }
  SUBCASE("receive returns nothing within its bound") { receive_times_out(make); }
  SUBCASE("a recycled payload buffer receives the next transfer") { recycled_buffers_are_reused(make); }
  SUBCASE("a peer that takes nothing never holds a send") { a_peer_that_takes_nothing_never_holds_sends(make); }
  SUBCASE("once peers are listed, only they are taken in") { only_listed_peers_are_taken_in(make); }
}

// The job's keys for the CURVE links of the suite: each link takes the next keypair.
const std::vector<CurveKeypair>& job_keypairs() {
  static const std::vector<CurveKeypair> keys = [] {
    std::vector<CurveKeypair> k;
    for (int i = 0; i < 4; ++i) k.push_back(make_curve_keypair());
    return k;
  }();
  return keys;
}

std::unique_ptr<Link> make_curve_link(const LinkFaults& faults, std::size_t chunk) {
  static std::size_t next = 0;
  const auto& keys = job_keypairs();
  std::set<std::string> listed;
  for (const auto& k : keys) listed.insert(k.public_key);
  return make_zmq_link("127.0.0.1", chunk, faults, 0, kLinkQueueBytes, LinkCurve{keys[next++ % keys.size()], listed});
}

// Whole messages that are not a chunk or a re-request, from a DEALER that is no link (one that
// holds a job's key, for a CURVE link: any other is not let connect at all).
std::size_t send_zmq_garbage(const std::string& address) {
  zmq::context_t context(1);
  zmq::socket_t raw(context, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::linger, 1000);
  const CurveAddress target = split_curve_address(address);
  if (target.public_key) {
    const CurveKeypair& own = job_keypairs().front();
    raw.set(zmq::sockopt::routing_id, curve_address("tcp://127.0.0.1:1", own.public_key));
    raw.set(zmq::sockopt::curve_serverkey, *target.public_key);
    raw.set(zmq::sockopt::curve_publickey, own.public_key);
    raw.set(zmq::sockopt::curve_secretkey, own.secret_key);
  }
  raw.connect(target.endpoint);
  const std::vector<std::vector<std::string>> messages = {
      {"junk"}, {"D", "not a header", "payload"}, {"R", "short"}, {"D", "a", "b", "c", "d"}, {"", ""}};
  for (const auto& parts : messages)
    for (std::size_t i = 0; i < parts.size(); ++i)
      REQUIRE(raw.send(zmq::buffer(parts[i]), i + 1 < parts.size() ? zmq::send_flags::sndmore : zmq::send_flags::none));
  return messages.size();
}

// Active messages with the link's id (0x4d) that are not a chunk or a re-request, from a bare UCP
// endpoint: headers too short, of an unknown kind, an undecodable chunk header (one sent by
// rendezvous, whose data the link fetches first), re-requests of the wrong size, with data, or for a
// transfer never sent.
std::size_t send_ucx_garbage(const std::string& address) {
  const auto check = [](ucs_status_t status, const char* what) {
    if (status != UCS_OK) throw std::runtime_error(std::string(what) + ": " + ucs_status_string(status));
  };
  ucp_context_h context = make_ucp_context(true, UCP_FEATURE_AM);
  ucp_worker_params_t worker_params{};
  ucp_worker_h worker = nullptr;
  check(ucp_worker_create(context, &worker_params, &worker), "worker");

  const auto colon = address.rfind(':');
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1))));
  peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ucp_ep_params_t ep_params{};
  ep_params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  ep_params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  ep_params.sockaddr = {reinterpret_cast<const sockaddr*>(&peer), sizeof peer};
  ep_params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ucp_ep_h ep = nullptr;
  check(ucp_ep_create(worker, &ep_params, &ep), "endpoint");

  const std::string me = "ucx://127.0.0.1:1";
  const std::string named = std::string(1, char(me.size())) + me;
  struct Message {
    std::string header, data;
    unsigned flags = UCP_AM_SEND_FLAG_EAGER;
  };
  const std::vector<Message> messages = {
      {"", "x"},
      {"D", ""},
      {"junk", ""},
      {std::string("D\xc8").append(me), "payload"},  // claims a 200-byte address
      {"X" + named + "body", ""},
      {"D" + named + "not a header", "payload"},
      {"R" + named + "short", ""},
      {"R" + named + std::string(12, '\0'), "data"},
      {"R" + named + std::string(12, '\0'), ""},  // transfer 0 was never sent to "ucx://127.0.0.1:1"
      {"D" + named + "not a header", std::string(100'000, 'r'), UCP_AM_SEND_FLAG_RNDV},
  };
  std::vector<ucs_status_ptr_t> requests;
  for (const Message& m : messages) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = m.flags;
    requests.push_back(
        ucp_am_send_nbx(ep, 0x4d, m.header.data(), m.header.size(), m.data.data(), m.data.size(), &param));
  }
  // Done when every message has been taken (the rendezvous one once the link fetched its data).
  const auto deadline = Clock::now() + 5s;
  for (ucs_status_ptr_t request : requests) {
    if (UCS_PTR_IS_ERR(request)) throw std::runtime_error("garbage not sent");
    if (request == nullptr) continue;
    while (ucp_request_check_status(request) == UCS_INPROGRESS && Clock::now() < deadline) ucp_worker_progress(worker);
    ucp_request_free(request);
  }
  ucp_request_param_t flush{};
  if (ucs_status_ptr_t request = ucp_worker_flush_nbx(worker, &flush); request != nullptr && !UCS_PTR_IS_ERR(request)) {
    while (ucp_request_check_status(request) == UCS_INPROGRESS && Clock::now() < deadline) ucp_worker_progress(worker);
    ucp_request_free(request);
  }
  ucp_request_param_t close{};
  close.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  close.flags = UCP_EP_CLOSE_FLAG_FORCE;
  if (ucs_status_ptr_t request = ucp_ep_close_nbx(ep, &close); request != nullptr && !UCS_PTR_IS_ERR(request)) {
    while (ucp_request_check_status(request) == UCS_INPROGRESS && Clock::now() < deadline) ucp_worker_progress(worker);
    ucp_request_free(request);
  }
  ucp_worker_destroy(worker);
  ucp_cleanup(context);
  if (Clock::now() >= deadline) throw std::runtime_error("garbage not taken within 5 s");
  return messages.size();
}

// The receiving half both links share, driven as the UCX link drives it: payloads written straight to
// the place a claim reserves, checked where they land.
TEST_CASE("incoming transfers: chunks land in place, a dropped claim frees its place, a claim outlives its transfer") {
  IncomingTransfers in;
  Link::Counters c;
  const auto payload = pattern(3 * kChunkBytes, 1);
  const auto frames = make_frames(1, 2, payload, kChunkBytes);  // 3 chunks
  const auto land = [&](std::size_t i) {
    auto place = in.place("p", frames[i].header, frames[i].payload.size());
    REQUIRE(place.has_value());
    std::copy(frames[i].payload.begin(), frames[i].payload.end(), place->bytes.begin());
    return in.landed(place->claim, c);
  };

  SUBCASE("in place, damaged, dropped") {
    CHECK_FALSE(land(2).delivered.has_value());
    {
      auto place = in.place("p", frames[0].header, frames[0].payload.size());
      REQUIRE(place.has_value());
      CHECK_FALSE(in.place("p", frames[0].header, frames[0].payload.size()).has_value());  // being written
      place->bytes[0] ^= std::byte{1};
      const auto damaged = in.landed(place->claim, c);
      CHECK(damaged.rerequest == 0u);
      CHECK(c.rejected == 1);
    }
    { auto dropped = in.place("p", frames[0].header, frames[0].payload.size()); }  // a receive that failed
    CHECK_FALSE(in.add("p", frames[0].header, frames[0].payload, c).delivered.has_value());
    const auto done = land(1);
    REQUIRE(done.delivered.has_value());
    CHECK(done.delivered->bytes == payload);
    CHECK(done.delivered->tag == 2);
    CHECK_FALSE(in.place("p", frames[1].header, frames[1].payload.size()).has_value());  // delivered already
    CHECK(in.add("p", frames[1].header, frames[1].payload, c).delivered == std::nullopt);
    CHECK(c.duplicates == 1);
    CHECK(c.rejected == 1);
  }

  SUBCASE("payloads sent ahead of their headers wait for them") {
    const auto placement = [&](std::size_t i) {
      const auto h = decode_chunk_header(frames[i].header);
      return Assembler::Placement{h.transfer_id, h.index, h.count, h.total_bytes, h.offset, h.length};
    };
    // Chunk 0 lands in place, chunk 1 comes in a buffer of its own, chunk 2's payload never comes.
    auto place = in.place("p", placement(0), frames[0].payload.size());
    REQUIRE(place.has_value());
    CHECK_FALSE(in.place("p", placement(0), frames[0].payload.size()).has_value());  // being written
    std::copy(frames[0].payload.begin(), frames[0].payload.end(), place->bytes.begin());
    CHECK(place->claim->transfer_id() == 1);
    const auto landed = in.landed(place->claim, c);
    CHECK_FALSE(landed.delivered.has_value());
    CHECK_FALSE(landed.rerequest.has_value());
    CHECK_FALSE(in.add("p", placement(1), frames[1].payload, c).delivered.has_value());
    { auto dropped = in.place("p", placement(2), frames[2].payload.size()); }  // a receive that failed
    for (std::size_t i : {0, 1}) {
      const auto o = in.confirm("p", frames[i].header, c);
      CHECK_FALSE(o.delivered.has_value());
      CHECK_FALSE(o.rerequest.has_value());
    }
    const auto missing = in.confirm("p", frames[2].header, c);
    CHECK(missing.rerequest == 2u);  // asked for again: the frame sent again completes the transfer
    const auto done = in.add("p", frames[2].header, frames[2].payload, c);
    REQUIRE(done.delivered.has_value());
    CHECK(done.delivered->bytes == payload);
    CHECK(done.delivered->tag == 2);
    CHECK(c.rejected == 0);
    CHECK(in.confirm("p", frames[2].header, c).delivered == std::nullopt);  // late: a duplicate
    CHECK(c.duplicates == 1);
  }

  SUBCASE("a payload sent ahead whose transfer gives way while it is written is kept for its header") {
    const auto h1 = decode_chunk_header(frames[1].header);
    auto place = in.place("p", Assembler::Placement{1, 1, h1.count, h1.total_bytes, h1.offset, h1.length},
                          frames[1].payload.size());
    REQUIRE(place.has_value());
    for (std::uint64_t id = 2; id <= 257; ++id) {
      const auto bytes = pattern(2 * 1000, id);
      const auto other = make_frames(id, 0, bytes, 1000);
      CHECK_FALSE(in.add("p", other[0].header, other[0].payload, c).delivered.has_value());
    }
    std::copy(frames[1].payload.begin(), frames[1].payload.end(), place->bytes.begin());
    CHECK_FALSE(in.landed(place->claim, c).delivered.has_value());
    place.reset();
    CHECK_FALSE(in.confirm("p", frames[1].header, c).rerequest.has_value());  // it is there
    CHECK_FALSE(in.add("p", frames[0].header, frames[0].payload, c).delivered.has_value());
    const auto done = in.add("p", frames[2].header, frames[2].payload, c);
    REQUIRE(done.delivered.has_value());
    CHECK(done.delivered->bytes == payload);
    CHECK(c.rejected == 0);
  }

  SUBCASE("the transfer gives way while a chunk is being written into it") {
    CHECK_FALSE(land(0).delivered.has_value());
    auto place = in.place("p", frames[1].header, frames[1].payload.size());
    REQUIRE(place.has_value());
    // As many newer partial transfers as a link holds at once: transfer 1, the oldest, gives way.
    for (std::uint64_t id = 2; id <= 257; ++id) {
      const auto bytes = pattern(2 * 1000, id);
      const auto other = make_frames(id, 0, bytes, 1000);
      CHECK_FALSE(in.add("p", other[0].header, other[0].payload, c).delivered.has_value());
    }
    // Its memory is still there for the chunk being written; once in, the chunk counts as a frame
    // of its own towards the transfer begun afresh.
    std::copy(frames[1].payload.begin(), frames[1].payload.end(), place->bytes.begin());
    CHECK_FALSE(in.landed(place->claim, c).delivered.has_value());
    place.reset();
    CHECK_FALSE(in.add("p", frames[2].header, frames[2].payload, c).delivered.has_value());
    const auto done = in.add("p", frames[0].header, frames[0].payload, c);
    REQUIRE(done.delivered.has_value());
    CHECK(done.delivered->bytes == payload);
    CHECK(c.rejected == 0);
  }
}

// What each link puts on the wire for its frames, as LinkFaults make them.
TEST_CASE("injected faults: reordered frames go right after the next one, the last never waits, a seed repeats") {
  const auto payload = pattern(10 * 1000, 3);
  const auto frames = make_frames(1, 0, payload, 1000);  // 10 frames
  const auto owner = std::make_shared<int>(0);
  const auto indices = [&](const std::vector<WireFrame>& wire) {
    std::vector<std::uint32_t> out;
    for (const auto& w : wire) out.push_back(decode_chunk_header(w.header).index);
    return out;
  };
  {
    FaultInjector all({.reorder_probability = 1, .seed = 1});
    Link::Counters c;
    // Every frame wants to wait: each other one is held back behind its successor; the last goes last.
    CHECK(indices(all.wire(frames, owner, c)) == std::vector<std::uint32_t>{1, 0, 3, 2, 5, 4, 7, 6, 9, 8});
    CHECK(c.reordered == 5);
    CHECK(indices(all.wire(std::span<const Frame>(frames).first(1), owner, c)) == std::vector<std::uint32_t>{0});
    CHECK(c.reordered == 5);
    CHECK(c.faults_injected == 5);
  }
  const LinkFaults faults{.corrupt_probability = 0.3, .duplicate_probability = 0.3, .truncate_probability = 0.3,
                          .reorder_probability = 0.3, .seed = 7};
  FaultInjector a(faults), b(faults);
  Link::Counters ca, cb;
  for (int round = 0; round < 20; ++round) {
    const auto wa = a.wire(frames, owner, ca);
    const auto wb = b.wire(frames, owner, cb);
    REQUIRE(wa.size() == wb.size());
    for (std::size_t i = 0; i < wa.size(); ++i) {
      CHECK(wa[i].header.data() == wb[i].header.data());
      CHECK(std::equal(wa[i].payload.begin(), wa[i].payload.end(), wb[i].payload.begin(), wb[i].payload.end()));
    }
    // Every frame goes out at least once.
    auto sent = indices(wa);
    std::sort(sent.begin(), sent.end());
    sent.erase(std::unique(sent.begin(), sent.end()), sent.end());
    CHECK(sent.size() == frames.size());
  }
  CHECK(ca.faults_injected == ca.corrupted + ca.duplicated + ca.truncated + ca.reordered);
  CHECK(ca.corrupted > 0);
  CHECK(ca.duplicated > 0);
  CHECK(ca.truncated > 0);
  CHECK(ca.reordered > 0);
  CHECK(ca.faults_injected == cb.faults_injected);
  // Without reordering asked for, no draw is made for it: the other faults fall as they did before
  // it existed (three draws per frame, then the byte to flip).
  FaultInjector three(
      {.corrupt_probability = 0.3, .duplicate_probability = 0.3, .truncate_probability = 0.3, .seed = 7});
  Link::Counters c3, before;
  Rng rng(7);
  for (int round = 0; round < 20; ++round) {
    three.wire(frames, owner, c3);
    for (std::size_t i = 0; i < frames.size(); ++i) {
      const bool corrupt = rng.uniform() < 0.3, duplicate = rng.uniform() < 0.3, truncate = rng.uniform() < 0.3;
      if (corrupt) rng.below(frames[i].payload.size()), ++before.corrupted;
      before.duplicated += duplicate;
      before.truncated += truncate;
    }
  }
  CHECK(c3.reordered == 0);
  CHECK(c3.corrupted == before.corrupted);
  CHECK(c3.duplicated == before.duplicated);
  CHECK(c3.truncated == before.truncated);
}

TEST_CASE("zmq link") {
  run_suite({[](const LinkFaults& f, std::size_t chunk) { return make_zmq_link("127.0.0.1", chunk, f); }},
            send_zmq_garbage);
  SUBCASE("binds the port it is given") {
    binds_the_port_it_is_given([](std::uint16_t port) { return make_zmq_link("127.0.0.1", kChunkBytes, {}, port); });
  }
  SUBCASE("past its queue's bound, a peer that takes nothing gets no more transfers, and the others do") {
    // 64 KiB: 1,000-byte transfers cost 1,256 bytes each (payload and frame), so the 53rd is the
    // last to find 64 KiB or less waiting, and nothing leaves for a peer that is gone.
    auto a = make_zmq_link("127.0.0.1", kChunkBytes, {}, 0, 64 << 10);
    auto b = make_zmq_link("127.0.0.1", kChunkBytes);
    const std::string gone = make_zmq_link("127.0.0.1", kChunkBytes)->address();
    for (std::uint64_t id = 1; id <= 100; ++id) a->send(gone, id, 0, pattern(1000, id));
    CHECK(a->counters().frames_sent == 53);
    CHECK(a->counters().dropped == 47);
    a->send(b->address(), 101, 0, pattern(1000, 101));
    const auto got = deliver(*b, {a.get()});
    REQUIRE(got.has_value());
    CHECK(got->bytes == pattern(1000, 101));
  }
}

TEST_CASE("zmq link with CURVE") {
  run_suite({make_curve_link}, send_zmq_garbage);
}

TEST_CASE("ucx link") {
  run_suite({[](const LinkFaults& f, std::size_t chunk) { return make_ucx_link("127.0.0.1", chunk, f); }},
            send_ucx_garbage);
  SUBCASE("binds the port it is given") {
    binds_the_port_it_is_given([](std::uint16_t port) { return make_ucx_link("127.0.0.1", kChunkBytes, {}, port); });
  }
}

}  // namespace
}  // namespace meridian
