// PeerGate, and the ZeroMQ link under the forged-identity attack of issue 17: chunks whose header
// is valid and whose payload fails its checksum, each under another claimed sender, so that a link
// that re-requested from whatever name a message gives would dial out once per name.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "transport/chunking/chunker.hpp"
#include "transport/link/peer_gate.hpp"
#include "transport/link/zmq_link.hpp"

namespace meridian {
namespace {

using namespace std::chrono_literals;

TEST_CASE("peer gate: everyone until peers are listed, then listed peers only, refusals named and bounded") {
  PeerGate gate;
  CHECK(gate.let_in("tcp://10.0.0.9:1"));
  CHECK_FALSE(gate.listed("tcp://10.0.0.9:1"));  // admitted, but no one is listed to be dialled
  gate.set({"tcp://10.0.0.1:5000", "tcp://10.0.0.2:5000"}, nullptr);
  CHECK(gate.let_in("tcp://10.0.0.1:5000"));
  CHECK(gate.listed("tcp://10.0.0.2:5000"));
  CHECK_FALSE(gate.admits("tcp://10.0.0.9:1"));
  CHECK(gate.take_refusals().empty());  // admits() asks, it does not count

  CHECK_FALSE(gate.let_in("tcp://10.0.0.9:1"));
  CHECK_FALSE(gate.let_in("tcp://10.0.0.9:1"));
  CHECK_FALSE(gate.let_in(std::string("evil\n\x01") + std::string(100, 'x')));
  for (int i = 0; i < 40; ++i) CHECK_FALSE(gate.let_in("tcp://10.0.1." + std::to_string(i) + ":1"));
  const auto refused = gate.take_refusals();
  CHECK(refused.size() == PeerGate::kMaxNamed + 1);
  CHECK(refused.at("tcp://10.0.0.9:1") == 2);
  CHECK(refused.at("evil??" + std::string(PeerGate::kMaxNameChars - 6, 'x') + "...") == 1);
  CHECK(refused.at(PeerGate::kOtherSenders) == 40 - (PeerGate::kMaxNamed - 2));
  CHECK(gate.take_refusals().empty());

  gate.set({}, nullptr);
  CHECK_FALSE(gate.let_in("tcp://10.0.0.1:5000"));  // an empty list admits no one
}

TEST_CASE("peer gate: a sender not listed is let in when the voucher says so, and the voucher may list it again") {
  PeerGate gate;
  std::vector<std::string> asked;
  PeerGate::Vouch vouch = [&](const std::string& sender) {
    asked.push_back(sender);
    if (sender != "tcp://10.0.0.3:5000") return false;
    gate.set({"tcp://10.0.0.1:5000", sender}, vouch);  // as CrossSite does: it read the members again
    return true;
  };
  gate.set({"tcp://10.0.0.1:5000"}, vouch);
  CHECK(gate.let_in("tcp://10.0.0.3:5000"));  // joined since the list was made
  CHECK(gate.let_in("tcp://10.0.0.3:5000"));  // listed now: not asked again
  CHECK_FALSE(gate.let_in("tcp://10.0.0.9:1"));
  CHECK(asked == std::vector<std::string>{"tcp://10.0.0.3:5000", "tcp://10.0.0.9:1"});
  CHECK(gate.take_refusals() == std::map<std::string, std::uint64_t>{{"tcp://10.0.0.9:1", 1}});
}

std::size_t open_files() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// Forged chunks, one per claimed sender: a one-chunk transfer's valid header with a payload that
// fails its checksum. Sent in batches, each batch's sockets flushed and closed before the next, so
// the attacker's own descriptors come and go.
void forge(const std::string& victim, const std::vector<std::string>& identities) {
  std::vector<std::byte> payload(1000, std::byte{7});
  const auto frames = make_frames(42, 1, payload, kDefaultChunkBytes);
  payload[500] = std::byte{8};
  constexpr std::size_t kBatch = 100;
  for (std::size_t at = 0; at < identities.size(); at += kBatch) {
    zmq::context_t context(1);
    std::vector<zmq::socket_t> sockets;
    for (std::size_t i = at; i < std::min(at + kBatch, identities.size()); ++i) {
      zmq::socket_t& s = sockets.emplace_back(context, zmq::socket_type::dealer);
      s.set(zmq::sockopt::routing_id, identities[i]);
      s.set(zmq::sockopt::linger, 2000);
      s.connect(victim);
      REQUIRE(s.send(zmq::buffer("D", 1), zmq::send_flags::sndmore));
      REQUIRE(s.send(zmq::buffer(frames[0].header.data(), frames[0].header.size()), zmq::send_flags::sndmore));
      REQUIRE(s.send(zmq::buffer(payload.data(), payload.size())));
    }
    for (auto& s : sockets) s.close();
    context.close();  // returns once every lingering message has left
  }
}

// Takes what waits at the victim until nothing has come for 300 ms, answering nothing.
void drain(Link& victim) {
  while (victim.receive(300ms)) {
  }
}

// The victim's peers listed (as CrossSite lists the members) or not.
void forged_senders(bool listed) {
  // A listener that would hear from the victim if it ever dialled the name a forged chunk gives.
  zmq::context_t trap_context(1);
  zmq::socket_t trap(trap_context, zmq::socket_type::router);
  trap.set(zmq::sockopt::linger, 0);
  trap.bind("tcp://127.0.0.1:*");
  const std::string trap_address = trap.get(zmq::sockopt::last_endpoint);

  constexpr std::size_t kChunkBytes = 64 << 10;
  auto victim = make_zmq_link("127.0.0.1", kChunkBytes);
  auto honest = make_zmq_link("127.0.0.1", kChunkBytes, {.corrupt_probability = 0.3, .seed = 3});
  if (listed) victim->set_peers({honest->address()}, nullptr);

  // 1,100 names, the trap's among them, four times over: the attack that, before, had the victim
  // open a socket per name until ZeroMQ's 1,023 ran out and the process exited.
  std::vector<std::string> others;
  for (int i = 1; i < 1100; ++i) others.push_back("tcp://127.0.0.1:" + std::to_string(20000 + i));
  std::vector<std::string> identities = others;
  identities.push_back(trap_address);
  const std::size_t files_before = open_files();
  for (int burst = 0; burst < 4; ++burst) {
    // The trap's name alone first, so that it is among the names a refusal report keeps (the first
    // 16) whatever order ZeroMQ hands over the burst's 1,099 other connections in.
    forge(victim->address(), {trap_address});
    drain(*victim);
    forge(victim->address(), others);
    drain(*victim);
  }
  const auto c = victim->counters();
  CHECK(c.frames_received == 4 * identities.size());
  CHECK(c.rerequests == 0);
  if (listed) {
    CHECK(c.strangers == 4 * identities.size());
    const auto refused = victim->take_refusals();
    CHECK(refused.size() == PeerGate::kMaxNamed + 1);
    CHECK(refused.at(trap_address) == 4);
  } else {
    CHECK(c.rejected == 4 * identities.size());  // taken in and refused by the checksum, asked of no one
  }
  CHECK(open_files() <= files_before + 8);  // the victim's sockets did not grow with the names
  zmq::message_t nothing;
  CHECK_FALSE(trap.recv(nothing, zmq::recv_flags::dontwait));

  // Its peer's transfers still arrive, a corrupted chunk re-requested from it: a listed peer may be
  // dialled for that; an unlisted one, never sent to, may not (the protocol asks again instead).
  const std::vector<std::byte> payload(300'000, std::byte{5});
  honest->send(victim->address(), 1, 0, payload);
  std::optional<Received> got;
  for (int i = 0; i < 40 && !got; ++i) {
    got = victim->receive(50ms);
    CHECK_FALSE(honest->receive(0ms).has_value());
  }
  REQUIRE(honest->counters().corrupted > 0);
  if (listed) {
    REQUIRE(got.has_value());
    CHECK(got->bytes == payload);
    CHECK(victim->counters().rerequests > 0);
  } else {
    CHECK_FALSE(got.has_value());
    CHECK(victim->counters().rerequests == 0);
  }
}

TEST_CASE("zmq link under forged sender names: never dials one, holds no socket for them, keeps serving its peers") {
  SUBCASE("its peers not listed yet") { forged_senders(false); }
  SUBCASE("its peers listed") { forged_senders(true); }
}

}  // namespace
}  // namespace meridian
