#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <latch>
#include <thread>

#include "core/util/error.hpp"
#include "sync/control/base64.hpp"
#include "sync/control/etcd_client.hpp"
#include "tests/support/etcd_server.hpp"

using namespace meridian;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

#define SKIP_WITHOUT_ETCD(server)                                              \
  if (!(server).ok()) {                                                        \
    MESSAGE("skipped: no runnable etcd at ", testing::EtcdServer::kBinary);    \
    return;                                                                    \
  }

EtcdClient client_for(const std::string& endpoint, std::chrono::milliseconds timeout = 5000ms) {
  return EtcdClient(EtcdOptions{{endpoint}, timeout});
}

// Listens on a loopback port; answers one connection with `reply` after reading the request's
// first bytes, or, with an empty reply, holds it open unanswered.
class FakeServer {
 public:
  explicit FakeServer(std::string reply) : reply_(std::move(reply)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    REQUIRE(::listen(fd_, 8) == 0);
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;  // shut down by the destructor
      char buf[512];
      (void)::recv(c, buf, sizeof(buf), 0);
      if (reply_.empty()) {
        held_ = c;
        return;
      }
      (void)::send(c, reply_.data(), reply_.size(), MSG_NOSIGNAL);
      ::close(c);
    });
  }
  ~FakeServer() {
    ::shutdown(fd_, SHUT_RDWR);  // wakes a blocked accept()
    thread_.join();
    if (held_ >= 0) ::close(held_);
    ::close(fd_);
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  std::string reply_;
  int fd_ = -1;
  int port_ = 0;
  int held_ = -1;
  std::thread thread_;
};

ErrorKind kind_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    MESSAGE(std::string(e.what()));
    return e.kind();
  }
  FAIL_CHECK("no Error thrown");
  return ErrorKind::Usage;
}

}  // namespace

TEST_CASE("base64 round-trips arbitrary bytes and rejects non-canonical text") {
  for (const std::string& s : {std::string(), std::string("a"), std::string("ab"), std::string("abc"),
                              std::string("\0\xff\x80 x", 5)})
    CHECK(base64_decode(base64_encode(s)) == s);
  CHECK(base64_encode("abcd") == "YWJjZA==");
  for (const char* bad : {"YWJjZA=", "YW=jZA==", "YWJjZB==", "YWJj*A==", "=AAA"}) CHECK_FALSE(base64_decode(bad));
}

TEST_CASE("etcd: put/get/get_prefix, create_if_absent races, compare_and_swap, failover") {
  testing::EtcdServer server;
  SKIP_WITHOUT_ETCD(server);
  auto etcd = client_for(server.endpoint());

  const std::string binary("v\0\xff\n", 4);
  etcd.put("/m/a", "1");
  etcd.put("/m/c", binary);
  etcd.put("/m/b", "2");
  etcd.put("/n/a", "other");
  etcd.put(std::string("/m\xff", 3), "past the prefix");
  CHECK(etcd.get("/m/a") == "1");
  CHECK(etcd.get("/m/c") == binary);
  CHECK_FALSE(etcd.get("/m/none"));
  using KVs = std::vector<std::pair<std::string, std::string>>;
  CHECK(etcd.get_prefix("/m/") == KVs{{"/m/a", "1"}, {"/m/b", "2"}, {"/m/c", binary}});
  CHECK(etcd.get_prefix("/none/").empty());
  CHECK(etcd.get_prefix("").size() == 5);

  // Two clients on two threads race for every key: exactly one create wins each time.
  constexpr int kKeys = 40;
  std::atomic<int> wins[2] = {0, 0};
  std::latch start(2);
  auto racer = [&](int who) {
    auto mine = client_for(server.endpoint());
    start.arrive_and_wait();
    for (int k = 0; k < kKeys; ++k)
      if (mine.create_if_absent("/race/" + std::to_string(k), std::to_string(who))) ++wins[who];
  };
  std::thread t0(racer, 0), t1(racer, 1);
  t0.join();
  t1.join();
  CHECK(wins[0] + wins[1] == kKeys);
  int owned_by_0 = 0;
  for (const auto& [key, value] : etcd.get_prefix("/race/")) owned_by_0 += value == "0";
  CHECK(owned_by_0 == wins[0]);
  CHECK_FALSE(etcd.create_if_absent("/m/a", "again"));
  CHECK(etcd.get("/m/a") == "1");

  CHECK(etcd.compare_and_swap("/m/a", "1", "one"));
  CHECK(etcd.get("/m/a") == "one");
  CHECK_FALSE(etcd.compare_and_swap("/m/a", "1", "uno"));
  CHECK(etcd.get("/m/a") == "one");
  CHECK_FALSE(etcd.compare_and_swap("/m/missing", "", "x"));
  CHECK_FALSE(etcd.get("/m/missing"));

  // A dead first endpoint is skipped.
  EtcdClient failover(EtcdOptions{{"http://127.0.0.1:" + std::to_string(testing::free_loopback_port()), server.endpoint()}, 2000ms});
  CHECK(failover.get("/m/a") == "one");

  CHECK(kind_of([&] { etcd.keep_alive(12345); }) == ErrorKind::Peer);
  CHECK(kind_of([&] { etcd.put("/m/x", "y", 12345); }) == ErrorKind::Peer);
}

TEST_CASE("etcd: a key on a lease vanishes after the TTL without keep-alive, stays with it") {
  testing::EtcdServer server;
  SKIP_WITHOUT_ETCD(server);
  auto etcd = client_for(server.endpoint());
  const auto left = etcd.grant_lease(2);
  const auto kept = etcd.grant_lease(2);
  etcd.put("/lease/left", "x", left);
  etcd.put("/lease/kept", "y", kept);

  const auto t0 = Clock::now();
  bool gone = false;
  while (Clock::now() - t0 < 6s && !(gone && Clock::now() - t0 > 3s)) {
    etcd.keep_alive(kept);
    gone = gone || !etcd.get("/lease/left");
    std::this_thread::sleep_for(250ms);
  }
  CHECK(gone);
  CHECK(Clock::now() - t0 > 3s);  // longer than the TTL, so only the renewals kept the other key
  CHECK(etcd.get("/lease/kept") == "y");
  etcd.revoke_lease(kept);
  CHECK_FALSE(etcd.get("/lease/kept"));
  CHECK(kind_of([&] { etcd.keep_alive(left); }) == ErrorKind::Peer);
}

TEST_CASE("etcd: unreachable, silent and garbage endpoints give typed errors in time") {
  SUBCASE("nothing listening -> Io") {
    auto etcd = client_for("http://127.0.0.1:" + std::to_string(testing::free_loopback_port()), 500ms);
    const auto t0 = Clock::now();
    const auto kind = kind_of([&] { etcd.get("k"); });
    CHECK((kind == ErrorKind::Io || kind == ErrorKind::Timeout));
    CHECK(Clock::now() - t0 < 1s);
  }
  SUBCASE("accepts but never answers -> Timeout") {
    FakeServer silent("");
    auto etcd = client_for(silent.endpoint(), 300ms);
    const auto t0 = Clock::now();
    CHECK(kind_of([&] { etcd.put("k", "v"); }) == ErrorKind::Timeout);
    CHECK(Clock::now() - t0 < 1s);
  }
  SUBCASE("garbage and malformed answers -> Peer") {
    const auto ok = [](const std::string& body) {
      return "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    };
    using Call = std::function<void(EtcdClient&)>;
    const Call get = [](EtcdClient& c) { c.get("k"); };
    const Call create = [](EtcdClient& c) { c.create_if_absent("k", "v"); };
    const Call grant = [](EtcdClient& c) { c.grant_lease(1); };
    const std::vector<std::pair<std::string, Call>> cases = {
        {"\x01\x02 garbage\r\n\r\n", get},
        {ok("{\"a\":"), get},
        {ok("[]"), create},
        {"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n", get},
        {"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}", get},  // cut short
        {ok("{\"kvs\":[{\"key\":\"!!\",\"value\":\"\"}]}"), get},
        {ok("{\"kvs\":{}}"), get},
        {ok("{\"kvs\":[{\"key\":\"aw==\",\"value\":7}]}"), get},
        {ok("{\"kvs\":[{\"key\":\"eA==\"}]}"), get},  // another key than asked for
        {ok("{\"succeeded\":\"maybe\"}"), create},
        {ok("{\"error\":\"etcdserver: too many requests\",\"code\":8}"), create},
        {ok("{\"ID\":\"x\"}"), grant},
        {ok("{\"ID\":[1]}"), grant},
        {ok("{}"), grant},
    };
    for (const auto& [reply, call] : cases) {
      CAPTURE(reply);
      FakeServer junk(reply);
      auto etcd = client_for(junk.endpoint(), 1000ms);
      CHECK(kind_of([&] { call(etcd); }) == ErrorKind::Peer);
    }
  }
}
