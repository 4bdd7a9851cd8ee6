// A Gloo pair is used only after the connection on it proves the key its peer published in the
// store: the proof itself, and a process that reaches a pair's port before the real peer.
#include <doctest/doctest.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "core/util/error.hpp"
#include "intrasite/comm/gloo_communicator.hpp"
#include "intrasite/comm/mesh_proof.hpp"
#include "intrasite/comm/store.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/ranks.hpp"

using namespace meridian;
using namespace std::chrono_literals;

namespace {

// The same /24 of loopback as own_loopback_address, host `host`: Gloo's pair listens on the side
// whose address is lower, so the hosts fix which side listens.
std::string loopback_host(int host) {
  std::string address = meridian::testing::own_loopback_address();
  return address.substr(0, address.rfind('.') + 1) + std::to_string(host);
}

// Passes everything through, but holds the get of `gated` until open() is called: a rank slow to
// connect, whose addresses are in the store already.
class GatedStore final : public Store {
 public:
  GatedStore(Store& inner, std::string gated) : inner_(inner), gated_(std::move(gated)), opened_(open_.get_future()) {}
  void open() {
    open_.set_value();
    opened_now_ = true;
  }
  void open_if_closed() {
    if (!opened_now_) open();
  }
  void set(const std::string& key, std::span<const std::byte> value) override { inner_.set(key, value); }
  std::vector<std::byte> get(const std::string& key, std::chrono::milliseconds timeout) override {
    if (key == gated_) opened_.wait_for(timeout);
    return inner_.get(key, timeout);
  }
  bool check(const std::string& key) override { return inner_.check(key); }
  std::int64_t add(const std::string& key, std::int64_t delta) override { return inner_.add(key, delta); }

 private:
  Store& inner_;
  const std::string gated_;
  std::promise<void> open_;
  std::shared_future<void> opened_;
  bool opened_now_ = false;  // set and read by the thread that opens
};

std::vector<char> chars(const std::vector<std::byte>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), reinterpret_cast<const char*>(bytes.data()) + bytes.size()};
}

// Plays rank 1 of the 2-rank mesh under prefix "g/" with Gloo itself, knowing only what a port scan
// of rank 0's host would give (rank 0's pair addresses), from a host above rank 0's, so that it
// connects to rank 0's listening pair. It sends `proof` where rank 1's belongs, then joins the
// barrier that ends connect_gloo. `connected` is called once its pair is up.
void impostor(Store& store, const Digest& proof, const std::function<void()>& connected) {
  gloo::rendezvous::HashStore own;
  own.set("rank_0", chars(store.get("g/rank_0", 5s)));
  own.set("0", chars(store.get("g/0", 5s)));
  gloo::transport::tcp::attr attr;
  attr.hostname = loopback_host(3);
  attr.ai_family = AF_INET;
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<gloo::rendezvous::Context>(1, 2);
  context->setTimeout(5s);
  context->connectFullMesh(own, device);
  connected();
  std::vector<std::uint8_t> sent(2 * proof.size()), received(sent.size());
  std::memcpy(sent.data(), proof.data(), proof.size());
  gloo::AlltoallOptions exchange(context);
  exchange.setInput(sent.data(), sent.size());
  exchange.setOutput(received.data(), received.size());
  gloo::alltoall(exchange);
  gloo::BarrierOptions barrier(context);
  gloo::barrier(barrier);
}

struct Race {
  std::exception_ptr victim, member, intruder;
};

// Rank 0 (the victim) and rank 1 (the member) connect under "g/"; the member is held back until
// the impostor, sending the proof that make_proof returns (given what the store holds), is
// connected in its place.
template <class MakeProof>
Race race(MakeProof make_proof) {
  MemoryStore store;
  GatedStore slow(store, "g/0");
  Race result;
  std::thread victim([&] {
    try {
      connect_gloo(store, "g/", 0, 2, GlooOptions{loopback_host(1), 5000ms});
    } catch (...) {
      result.victim = std::current_exception();
    }
  });
  std::thread member([&] {
    try {
      connect_gloo(slow, "g/", 1, 2, GlooOptions{loopback_host(2), 5000ms});
    } catch (...) {
      result.member = std::current_exception();
    }
  });
  try {
    impostor(store, make_proof(store), [&] { slow.open(); });
  } catch (...) {
    result.intruder = std::current_exception();
  }
  slow.open_if_closed();
  victim.join();
  member.join();
  return result;
}

MeshKey published_key(Store& store, int rank) {
  const auto bytes = store.get("g/" + mesh_key_name(rank), 5s);
  MeshKey key{};
  REQUIRE(bytes.size() == key.size());
  std::memcpy(key.data(), bytes.data(), key.size());
  return key;
}

}  // namespace

TEST_CASE("a pair's proof holds only under its key, for its mesh and its direction") {
  const MeshKey key = new_mesh_key(), other = new_mesh_key();
  CHECK(key != other);
  const Digest proof = pair_proof(key, "gen3/", 1, 0);
  CHECK(proof_holds(key, "gen3/", 1, 0, proof));
  CHECK_FALSE(proof_holds(other, "gen3/", 1, 0, proof));
  CHECK_FALSE(proof_holds(key, "gen4/", 1, 0, proof));
  CHECK_FALSE(proof_holds(key, "gen3/", 0, 1, proof));
  CHECK_FALSE(proof_holds(key, "gen3/", 1, 2, proof));
  CHECK_FALSE(proof_holds(key, "gen3/", 1, 0, std::span(proof).first(31)));
  // The prefix's length is part of the message: a prefix cannot absorb a rank's bytes.
  CHECK(pair_proof(key, "gen3/", 1, 0) != pair_proof(key, std::string("gen3/\x01", 6), 0, 0));
}

TEST_CASE("a process that reaches a pair's port before the peer, without its key, is refused before any collective") {
  const Race result = race([](Store&) { return pair_proof(new_mesh_key(), "g/", 1, 0); });
  REQUIRE(result.victim);
  const std::string error =
      meridian::testing::error_of(ErrorKind::Peer, [&] { std::rethrow_exception(result.victim); });
  CHECK(error.find("pair for rank 1 under prefix \"g/\" did not prove rank 1's key") != std::string::npos);
  // Its pair was taken, so its connection was refused: it is not met in this mesh.
  meridian::testing::error_of(ErrorKind::Peer, [&] { std::rethrow_exception(result.member); });
  CHECK(result.intruder);
}

TEST_CASE("the same race with rank 1's key is taken: the proof is what keeps the impostor out") {
  const Race result = race([](Store& store) { return pair_proof(published_key(store, 1), "g/", 1, 0); });
  CHECK_FALSE(result.victim);
  CHECK_FALSE(result.intruder);
  meridian::testing::error_of(ErrorKind::Peer, [&] { std::rethrow_exception(result.member); });
}
