#include <capnp/message.h>
#include <capnp/serialize.h>
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "core/util/error.hpp"
#include "intrasite/comm/tcp_store.hpp"
#include "tests/support/tcp_tap.hpp"
#include "transport/schemas/store.capnp.h"

using namespace meridian;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// What the site agent would draw at random (core/io/secret_file); any fixed text will do here.
constexpr const char* kSecret = "test-store-secret";

std::vector<std::byte> bytes(const std::string& s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

std::string text(const std::vector<std::byte>& b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

// The error a call throws, so a test can look at its kind and message.
template <class F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  FAIL("expected an Error");
  return Error(ErrorKind::Data, "unreachable");
}

std::string serialize(capnp::MessageBuilder& message) {
  const auto words = capnp::messageToFlatArray(message);
  return {reinterpret_cast<const char*>(words.asBytes().begin()), words.asBytes().size()};
}

// A set request as a client would encode it, for tests that bend it.
std::string set_request(std::uint64_t id, const std::string& key, std::size_t value_bytes, std::uint16_t version = 1) {
  capnp::MallocMessageBuilder message;
  auto request = message.initRoot<wire::StoreRequest>();
  request.setVersion(version);
  request.setId(id);
  request.setKey(key);
  request.setSecret(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(kSecret), std::strlen(kSecret)));
  request.initSet(static_cast<unsigned>(value_bytes));
  return serialize(message);
}

// A client speaking raw ZeroMQ: sends arbitrary frames to the server and decodes what comes back.
// It speaks CurveZMQ to the server of kSecret, as TcpStoreClient does, unless told to speak plain.
class RawPeer {
 public:
  enum class Security { curve, plain };
  explicit RawPeer(const std::string& endpoint, Security security = Security::curve)
      : socket_(context_, zmq::socket_type::dealer) {
    if (security == Security::curve) {
      const CurveKeypair own = make_curve_keypair();
      socket_.set(zmq::sockopt::curve_serverkey, store_server_curve_keys(kSecret).public_key);
      socket_.set(zmq::sockopt::curve_publickey, own.public_key);
      socket_.set(zmq::sockopt::curve_secretkey, own.secret_key);
    }
    socket_.set(zmq::sockopt::linger, 0);
    // The fuzz below sends 2,000 requests before it reads a reply: a ROUTER drops replies to a
    // peer whose queue is full (1,000 by default on each side), so this peer takes them all.
    socket_.set(zmq::sockopt::rcvhwm, 0);
    socket_.connect(endpoint);
  }

  struct Answer {
    std::uint64_t id;
    bool error;
    wire::StoreResponse::Failure::Kind kind;
    std::string message;
  };

  void send(const std::vector<std::string>& frames) {
    for (std::size_t i = 0; i < frames.size(); ++i)
      (void)socket_.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }

  bool answers_within(std::chrono::milliseconds wait) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    return zmq::poll(&item, 1, wait) == 1;
  }

  // The next reply, which must come within 5 s and be a well-formed response.
  Answer receive() {
    REQUIRE(answers_within(5000ms));
    zmq::message_t reply;
    REQUIRE(socket_.recv(reply).has_value());
    auto words = kj::heapArray<capnp::word>(reply.size() / sizeof(capnp::word));
    std::memcpy(words.begin(), reply.data(), reply.size());
    capnp::FlatArrayMessageReader reader(words);
    const auto response = reader.getRoot<wire::StoreResponse>();
    CHECK(response.getVersion() == wire::STORE_SCHEMA_VERSION);
    if (!response.isError()) return {response.getId(), false, {}, {}};
    return {response.getId(), true, response.getError().getKind(), response.getError().getMessage().cStr()};
  }

  // Sends one message of these frames and returns the error reply the server must give.
  Answer exchange(const std::vector<std::string>& frames) {
    send(frames);
    const Answer answer = receive();
    REQUIRE(answer.error);
    return answer;
  }

 private:
  zmq::context_t context_{1};
  zmq::socket_t socket_;
};

// A socket where a store would be, under kSecret's keys, for tests that play the server.
zmq::socket_t fake_server(zmq::context_t& context) {
  zmq::socket_t socket(context, zmq::socket_type::router);
  socket.set(zmq::sockopt::curve_server, 1);
  socket.set(zmq::sockopt::curve_secretkey, store_server_curve_keys(kSecret).secret_key);
  socket.set(zmq::sockopt::linger, 0);
  socket.bind("tcp://127.0.0.1:*");
  return socket;
}

}  // namespace

TEST_CASE("set, get, check and add round-trip through the server") {
  TcpStoreServer server("127.0.0.1", 0, kSecret);
  CHECK(server.port() > 0);
  CHECK(server.endpoint() == "tcp://127.0.0.1:" + std::to_string(server.port()));
  TcpStoreClient client(server.endpoint(), kSecret, 5s);

  CHECK_FALSE(client.check("addr/0"));
  client.set("addr/0", bytes("10.0.0.1:2000"));
  CHECK(client.check("addr/0"));
  CHECK(text(client.get("addr/0", 1s)) == "10.0.0.1:2000");
  client.set("addr/0", bytes(""));  // overwrite, with an empty value
  CHECK(client.get("addr/0", 0ms).empty());

  CHECK(client.add("generation", 1) == 1);
  CHECK(client.add("generation", 41) == 42);
  CHECK(client.add("generation", -2) == 40);
  std::int64_t stored = 0;
  const auto raw = client.get("generation", 1s);
  REQUIRE(raw.size() == sizeof stored);  // the same 8 bytes MemoryStore keeps for a counter
  std::memcpy(&stored, raw.data(), sizeof stored);
  CHECK(stored == 40);

  std::vector<std::byte> big(kMaxStoreValueBytes);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::byte>(i * 7);
  client.set("big", big);
  CHECK(client.get("big", 1s) == big);
}

TEST_CASE("a get waits for a set made later by another client") {
  TcpStoreServer server("127.0.0.1", 0, kSecret);
  auto waiter = std::async(std::launch::async, [&] {
    TcpStoreClient client(server.endpoint(), kSecret, 5s);
    return text(client.get("rank/1", 20s));
  });
  TcpStoreClient setter(server.endpoint(), kSecret, 5s);
  // Other keys and other clients are served while the get is parked.
  setter.set("other", bytes("x"));
  CHECK(text(setter.get("other", 1s)) == "x");
  setter.set("rank/1", bytes("host-b:7000"));
  CHECK(waiter.get() == "host-b:7000");
}

TEST_CASE("a get that times out says which key it waited for") {
  TcpStoreServer server("127.0.0.1", 0, kSecret);
  TcpStoreClient client(server.endpoint(), kSecret, 5s);
  const auto start = Clock::now();
  const Error e = error_of([&] { client.get("group/3/leader", 200ms); });
  const auto elapsed = Clock::now() - start;
  CHECK(e.kind() == ErrorKind::Timeout);
  CHECK(std::string(e.what()).find("\"group/3/leader\"") != std::string::npos);
  CHECK(elapsed >= 200ms);
  CHECK(elapsed < 3s);  // answered by the server at the get's timeout, not at the io timeout
  CHECK(error_of([&] { client.get("missing", 0ms); }).kind() == ErrorKind::Timeout);  // no wait at all
  client.set("after", bytes("ok"));  // the client is usable afterwards
  CHECK(text(client.get("after", 1s)) == "ok");
}

TEST_CASE("concurrent adds from 4 threads x 1000 are atomic") {
  TcpStoreServer server("127.0.0.1", 0, kSecret);
  std::vector<std::vector<std::int64_t>> seen(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      TcpStoreClient client(server.endpoint(), kSecret, 10s);
      for (int i = 0; i < 1000; ++i) seen[t].push_back(client.add("counter", 1));
    });
  for (auto& t : threads) t.join();
  std::set<std::int64_t> all;
  for (const auto& s : seen) all.insert(s.begin(), s.end());
  CHECK(all.size() == 4000);  // every add saw a distinct value: no two were merged
  CHECK(*all.begin() == 1);
  CHECK(*all.rbegin() == 4000);
  TcpStoreClient client(server.endpoint(), kSecret, 5s);
  CHECK(client.add("counter", 0) == 4000);
}

TEST_CASE("many clients rendezvous through one server") {
  TcpStoreServer server("127.0.0.1", 0, kSecret);
  constexpr int kClients = 16;
  std::vector<std::future<std::string>> ranks;
  for (int r = 0; r < kClients; ++r)
    ranks.push_back(std::async(std::launch::async, [&, r] {
      TcpStoreClient client(server.endpoint(), kSecret, 10s);
      client.set("addr/" + std::to_string(r), bytes("host" + std::to_string(r)));
      client.add("joined", 1);
      std::string all;  // every rank reads every address, most of them before they are set
      for (int peer = 0; peer < kClients; ++peer) all += text(client.get("addr/" + std::to_string(peer), 20s)) + ",";
      return all;
    }));
  std::string expected;
  for (int r = 0; r < kClients; ++r) expected += "host" + std::to_string(r) + ",";
  for (auto& r : ranks) CHECK(r.get() == expected);
  TcpStoreClient client(server.endpoint(), kSecret, 5s);
  CHECK(client.add("joined", 0) == kClients);
}

TEST_CASE("malformed and hostile requests get error replies and the server keeps serving") {
  TcpStoreServer server("127.0.0.1", 0, kSecret);
  RawPeer raw(server.endpoint());
  using Kind = wire::StoreResponse::Failure::Kind;

  std::mt19937 rng(1234);
  for (std::size_t size : {0, 1, 7, 8, 16, 64, 1000}) {
    std::string garbage(size, '\0');
    for (char& c : garbage) c = static_cast<char>(rng());
    const auto answer = raw.exchange({garbage});
    CHECK(answer.kind == Kind::INVALID);
    CHECK(answer.id == 0);
  }

  const std::string valid = set_request(5, "k", 100);
  auto answer = raw.exchange({valid.substr(0, valid.size() - 8)});  // a word short
  CHECK(answer.kind == Kind::INVALID);
  CHECK(answer.message.find("malformed") != std::string::npos);
  CHECK(raw.exchange({valid.substr(0, 13)}).kind == Kind::INVALID);  // not even whole words

  answer = raw.exchange({set_request(6, "k", 8, 99)});
  CHECK(answer.id == 6);  // the id is still echoed, so a client could match the refusal
  CHECK(answer.message.find("version 99") != std::string::npos);

  answer = raw.exchange({set_request(7, "k", kMaxStoreValueBytes + 1)});
  CHECK(answer.id == 7);
  CHECK(answer.message.find("exceeds the limit") != std::string::npos);
  answer = raw.exchange({set_request(8, std::string(kMaxStoreKeyBytes + 1, 'k'), 1)});
  CHECK(answer.id == 8);
  CHECK(answer.message.find("exceeds the limit") != std::string::npos);

  answer = raw.exchange({valid, valid});  // a request is exactly one frame
  CHECK(answer.message.find("1 frame") != std::string::npos);

  // Randomly corrupted requests, sent without waiting: whatever they decode to, the server must
  // survive them (this is what the sanitizer build checks).
  for (int i = 0; i < 2000; ++i) {
    std::string bent = set_request(100 + i, "fuzz", 24);
    for (int flips = 1 + static_cast<int>(rng() % 4); flips > 0; --flips) bent[rng() % bent.size()] ^= 1 << (rng() % 8);
    raw.send({bent});
  }
  raw.send({set_request(99999, "fuzz-done", 0)});  // answered after every bent request before it
  while (raw.receive().id != 99999) {
  }

  // An add on a value that is not a counter is refused rather than clobbering it; so is overflow.
  TcpStoreClient client(server.endpoint(), kSecret, 5s);
  client.set("name", bytes("abc"));
  Error e = error_of([&] { client.add("name", 1); });
  CHECK(e.kind() == ErrorKind::Peer);
  CHECK(std::string(e.what()).find("not an 8-byte counter") != std::string::npos);
  client.add("big", std::numeric_limits<std::int64_t>::max());
  CHECK(error_of([&] { client.add("big", 1); }).kind() == ErrorKind::Peer);
  CHECK(client.add("big", -1) == std::numeric_limits<std::int64_t>::max() - 1);

  CHECK(text(client.get("name", 1s)) == "abc");
  CHECK(client.check("k") == false);  // none of the bent sets were applied
}

// What issue 17 found: any local process could file an operator's command for the replicas
// (ops/cmd/<n>, then ops/cmds) and have it applied, bypassing the ops token.
TEST_CASE("a request without the store's secret is refused, and nothing it asks for is done") {
  TcpStoreServer server("127.0.0.1", 0, kSecret);
  TcpStoreClient site(server.endpoint(), kSecret, 5s);
  CHECK(site.add("ops/cmds", 0) == 0);
  for (const std::string wrong : {"", "test-store-secreT", "test-store-secret-and-more", "x"}) {
    CAPTURE(wrong);
    TcpStoreClient outsider(server.endpoint(), wrong, 5s);
    const Error e = error_of([&] { outsider.set("ops/cmd/1", bytes(R"({"command":"set-lr","scale":0.01})")); });
    CHECK(e.kind() == ErrorKind::Peer);
    CHECK(std::string(e.what()).find("not the site's store secret") != std::string::npos);
    CHECK(error_of([&] { outsider.add("ops/cmds", 1); }).kind() == ErrorKind::Peer);
    CHECK(error_of([&] { outsider.check("ops/cmds"); }).kind() == ErrorKind::Peer);
    CHECK(error_of([&] { outsider.get("ops/cmds", 0ms); }).kind() == ErrorKind::Peer);
  }
  RawPeer raw(server.endpoint());
  capnp::MallocMessageBuilder message;  // a well-formed request with no secret at all
  auto request = message.initRoot<wire::StoreRequest>();
  request.setVersion(wire::STORE_SCHEMA_VERSION);
  request.setId(3);
  request.setKey("ops/cmds");
  request.setAdd(1);
  const auto answer = raw.exchange({serialize(message)});
  CHECK(answer.id == 3);
  CHECK(answer.kind == wire::StoreResponse::Failure::Kind::UNAUTHENTICATED);

  CHECK_FALSE(site.check("ops/cmd/1"));
  CHECK(site.add("ops/cmds", 0) == 0);
}

TEST_CASE("one who reads the site's network sees neither the store's secret nor its keys and values") {
  const std::string key = "nccl/unique-id/3", value = "the-communicator's-unique-id-0123456789";
  {  // the tap does see what plain ZeroMQ carries
    zmq::context_t context(1);
    zmq::socket_t server(context, zmq::socket_type::router), client(context, zmq::socket_type::dealer);
    server.set(zmq::sockopt::linger, 0);
    client.set(zmq::sockopt::linger, 0);
    server.bind("tcp://127.0.0.1:*");
    const std::string endpoint = server.get(zmq::sockopt::last_endpoint);
    testing::TcpTap tap(std::stoi(endpoint.substr(endpoint.rfind(':') + 1)));
    client.connect("tcp://127.0.0.1:" + std::to_string(tap.port()));
    (void)client.send(zmq::buffer(value));
    zmq::message_t peer, frame;
    REQUIRE(server.recv(peer).has_value());
    REQUIRE(server.recv(frame).has_value());
    CHECK(tap.seen().find(value) != std::string::npos);
  }
  TcpStoreServer server("127.0.0.1", 0, kSecret);
  testing::TcpTap tap(server.port());
  TcpStoreClient client("tcp://127.0.0.1:" + std::to_string(tap.port()), kSecret, 5s);
  client.set(key, bytes(value));
  CHECK(text(client.get(key, 1s)) == value);
  const std::string seen = tap.seen();
  CHECK(seen.size() > 2 * value.size());
  CHECK(seen.find(kSecret) == std::string::npos);
  CHECK(seen.find(key) == std::string::npos);
  CHECK(seen.find(value) == std::string::npos);

  // Nor does a peer that will not speak CURVE get an answer of any kind.
  RawPeer plain(server.endpoint(), RawPeer::Security::plain);
  plain.send({set_request(1, "ops/cmds", 8)});
  CHECK_FALSE(plain.answers_within(300ms));
  TcpStoreClient site(server.endpoint(), kSecret, 5s);
  CHECK_FALSE(site.check("ops/cmds"));
}

TEST_CASE("a request changed on the way is dropped with its connection, and never applied") {
  TcpStoreServer server("127.0.0.1", 0, kSecret);
  testing::TcpTap tap(server.port());
  TcpStoreClient client("tcp://127.0.0.1:" + std::to_string(tap.port()), kSecret, 5s);
  client.set("a", bytes("1"));
  tap.flip_next_from_client();
  const Error e = error_of([&] { client.set("b", bytes("2")); });
  CHECK(e.kind() == ErrorKind::Peer);
  CHECK(std::string(e.what()).find("dropped the connection") != std::string::npos);
  CHECK_FALSE(client.check("b"));  // over a fresh connection, through the same tap
  CHECK(text(client.get("a", 1s)) == "1");
}

TEST_CASE("the client refuses oversized keys and values before sending") {
  TcpStoreServer server("127.0.0.1", 0, kSecret);
  TcpStoreClient client(server.endpoint(), kSecret, 5s);
  CHECK(error_of([&] { client.check(std::string(kMaxStoreKeyBytes + 1, 'k')); }).kind() == ErrorKind::Data);
  const std::vector<std::byte> too_big(kMaxStoreValueBytes + 1);
  CHECK(error_of([&] { client.set("v", too_big); }).kind() == ErrorKind::Data);
  CHECK_FALSE(client.check("v"));
}

TEST_CASE("a malformed reply is Error(Peer) and an unanswered call is Error(Timeout)") {
  // A fake server: answers the first request with garbage and ignores the second.
  zmq::context_t context(1);
  zmq::socket_t fake = fake_server(context);
  TcpStoreClient client(fake.get(zmq::sockopt::last_endpoint), kSecret, 300ms);
  auto answer = std::async(std::launch::async, [&] {
    zmq::message_t peer, request;
    REQUIRE(fake.recv(peer).has_value());
    REQUIRE(fake.recv(request).has_value());
    (void)fake.send(peer, zmq::send_flags::sndmore);
    (void)fake.send(zmq::str_buffer("definitely not capnp"), zmq::send_flags::none);
  });
  Error e = error_of([&] { client.check("k"); });
  answer.get();
  CHECK(e.kind() == ErrorKind::Peer);
  CHECK(std::string(e.what()).find("malformed reply") != std::string::npos);

  const auto start = Clock::now();
  e = error_of([&] { client.add("k", 1); });
  CHECK(e.kind() == ErrorKind::Timeout);
  CHECK(Clock::now() - start < 3s);
}

TEST_CASE("a server that goes away fails calls within the io timeout") {
  auto server = std::make_unique<TcpStoreServer>("127.0.0.1", 0, kSecret);
  TcpStoreClient client(server->endpoint(), kSecret, 300ms);
  client.set("k", bytes("v"));
  server.reset();
  for (int i = 0; i < 2; ++i) {
    const auto start = Clock::now();
    const Error e = error_of([&] { client.check("k"); });
    CHECK((e.kind() == ErrorKind::Timeout || e.kind() == ErrorKind::Peer));
    CHECK(Clock::now() - start < 3s);
  }
}

TEST_CASE("a get parked on a server that dies fails at once, not at its own timeout") {
  zmq::context_t context(1);
  auto fake = std::make_unique<zmq::socket_t>(fake_server(context));
  const std::string endpoint = fake->get(zmq::sockopt::last_endpoint);
  auto waiter = std::async(std::launch::async, [&] {
    TcpStoreClient client(endpoint, kSecret, 300ms);
    const auto start = Clock::now();
    const Error e = error_of([&] { client.get("never", 60s); });
    return std::make_pair(e.kind(), Clock::now() - start);
  });
  zmq::message_t peer, request;  // the get has arrived: now the "server" dies
  REQUIRE(fake->recv(peer).has_value());
  REQUIRE(fake->recv(request).has_value());
  fake.reset();
  const auto [kind, elapsed] = waiter.get();
  CHECK(kind == ErrorKind::Peer);
  CHECK(elapsed < 10s);
}

TEST_CASE("a port in use and a malformed endpoint are typed errors") {
  TcpStoreServer server("127.0.0.1", 0, kSecret);
  CHECK(error_of([&] { TcpStoreServer("127.0.0.1", server.port(), kSecret); }).kind() == ErrorKind::Io);
  CHECK(error_of([] { TcpStoreClient("not-an-endpoint", kSecret); }).kind() == ErrorKind::Config);
}

TEST_CASE("a forked child process sets a key the parent waits for") {
  TcpStoreServer server("127.0.0.1", 0, kSecret);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Only this process's own ZeroMQ context is used here; the parent's is never touched.
    ::alarm(30);  // a child that hangs dies instead of hanging the parent's waitpid
    int status = 1;
    try {
      TcpStoreClient client(server.endpoint(), kSecret, 5s);
      client.set("child/pid", bytes(std::to_string(::getpid())));
      status = client.add("children", 1) == 1 ? 0 : 2;
    } catch (...) {
    }
    ::_exit(status);
  }
  TcpStoreClient client(server.endpoint(), kSecret, 5s);
  const std::string pid = text(client.get("child/pid", 20s));
  int status = -1;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(pid == std::to_string(child));
  CHECK(client.add("children", 0) == 1);
}
