// The watch against a real etcd: it reports changes under its prefix (and only there), comes back
// after its member did, and never holds up its owner's destruction.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "crosssite/control/etcd_client.hpp"
#include "crosssite/control/etcd_watch.hpp"
#include "tests/support/etcd_cluster.hpp"
#include "tests/support/etcd_server.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/loopback_listener.hpp"

using namespace meridian;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using meridian::testing::eventually;

namespace {

// Stands in for a member that stopped answering without closing its streams: a watch request
// gets etcd's "created" and then silence; any other request a closed connection (so a client
// moves on to the next member).
class SilentMember {
 public:
  SilentMember() {
    const auto listener = testing::listen_on_loopback(16);
    fd_ = listener.fd;
    port_ = listener.port;
    thread_ = std::thread([this] {
      for (;;) {
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;  // shut down by the destructor
        char buf[2048];
        const auto n = ::recv(c, buf, sizeof(buf), 0);
        if (n > 0 && std::string(buf, static_cast<std::size_t>(n)).find("POST /v3/watch") == 0) {
          const std::string created = R"({"result":{"header":{"revision":"1"},"created":true}})" "\n";
          char size[16];
          std::snprintf(size, sizeof size, "%zx\r\n", created.size());
          const std::string reply = std::string("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                                "Transfer-Encoding: chunked\r\n\r\n") + size + created + "\r\n";
          (void)::send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
          held_.push_back(c);
          ++watches;
        } else {
          ::close(c);
        }
      }
    });
  }
  ~SilentMember() {
    ::shutdown(fd_, SHUT_RDWR);  // wakes the blocked accept()
    thread_.join();
    for (const int c : held_) ::close(c);
    ::close(fd_);
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::atomic<int> watches{0};

 private:
  int fd_ = -1;
  int port_ = 0;
  std::vector<int> held_;
  std::thread thread_;
};

}  // namespace

TEST_CASE("etcd watch: counts changes under its prefix, not beside it") {
  testing::EtcdServer server;
  EtcdClient etcd(EtcdOptions{{server.endpoint()}, 5000ms});
  EtcdWatch watch(EtcdOptions{{server.endpoint()}}, "/job/a/");
  REQUIRE(eventually([&] { return watch.watching(); }));
  const auto established = watch.changes();
  CHECK(established >= 1);  // being established is a change: what came before is unknown

  etcd.put("/job/b/x", "beside");
  etcd.put("/job/a", "the prefix without its slash");
  etcd.put("/job/a/x", "1");
  REQUIRE(eventually([&] { return watch.events() >= 1; }));
  CHECK(watch.changes() > established);
  CHECK(watch.events() == 1);  // the watch answers in revision order: nothing else came before it

  const auto lease = etcd.grant_lease(5);
  etcd.put("/job/a/member", "on a lease", lease);
  etcd.revoke_lease(lease);  // the key goes with it: a delete event
  CHECK(eventually([&] { return watch.events() == 3; }));
  CHECK(watch.watching());
}

TEST_CASE("etcd watch: each area counts the events under it, being established counts in every area") {
  testing::EtcdServer server;
  EtcdClient etcd(EtcdOptions{{server.endpoint()}, 5000ms});
  EtcdWatch watch(EtcdOptions{{server.endpoint()}}, "/job/", 1000ms, {"/job/members/", "/job/commits/"});
  REQUIRE(eventually([&] { return watch.watching(); }));
  const auto members = watch.changes(0), commits = watch.changes(1);
  CHECK(members >= 1);
  CHECK(commits >= 1);
  etcd.put("/job/deltas/a", "in no area");
  etcd.put("/job/commits/1", "c");
  REQUIRE(eventually([&] { return watch.events() == 2; }));
  CHECK(watch.changes(0) == members);
  CHECK(watch.changes(1) == commits + 1);
  etcd.put("/job/members/a", "m");
  REQUIRE(eventually([&] { return watch.changes(0) == members + 1; }));
  CHECK(watch.changes(1) == commits + 1);
}

TEST_CASE("etcd watch: with nothing listening it is not watching, destruction is prompt") {
  const auto port = free_loopback_port();
  const auto start = Clock::now();
  {
    EtcdWatch watch(EtcdOptions{{"127.0.0.1:" + std::to_string(port)}}, "/p/");
    std::this_thread::sleep_for(100ms);
    CHECK_FALSE(watch.watching());
    CHECK(watch.changes() == 0);
  }
  CHECK(Clock::now() - start < 2s);
  CHECK_THROWS_AS(EtcdWatch(EtcdOptions{{"http://nohostport"}}, "/p/"), Error);
}

TEST_CASE("etcd watch cluster: a killed member's watch moves to another, and reports what it missed as a change") {
  testing::EtcdCluster cluster;
  EtcdOptions o{cluster.endpoints(), 5000ms};
  o.request_timeout = 500ms;
  EtcdWatch watch(o, "/job/");
  REQUIRE(eventually([&] { return watch.watching(); }));
  const auto before = watch.changes();
  cluster.member(0).kill();  // the first endpoint: where the watch started
  EtcdClient etcd(o);
  etcd.put("/job/k", "written while the watch moved");
  // Either the event itself or the re-established watch (the write came while it was down).
  CHECK(eventually([&] { return watch.watching() && watch.changes() > before; }));
  const auto moved = watch.changes();
  etcd.put("/job/k", "after");
  CHECK(eventually([&] { return watch.changes() > moved; }));
}

TEST_CASE("etcd watch: a stream that went silent is caught by the probes and replaced by another member's") {
  testing::EtcdServer server;
  SilentMember silent;
  EtcdOptions o{{silent.endpoint(), server.endpoint()}, 5000ms};
  o.request_timeout = 500ms;
  EtcdWatch watch(o, "/job/", 100ms);
  REQUIRE(eventually([&] { return watch.watching(); }));
  CHECK(silent.watches == 1);  // the first endpoint: established, and silent from here on
  EtcdClient etcd(EtcdOptions{{server.endpoint()}, 5000ms});
  const auto before = watch.changes();
  // Writes keep coming: the probes see them and the stream not; after two such probes in a row
  // the watch moves to the real member, whose stream then carries the events.
  int written = 0;
  CHECK(eventually([&] {
    etcd.put("/job/k", std::to_string(++written));
    std::this_thread::sleep_for(20ms);
    return watch.events() > 0;
  }));
  CHECK(watch.missed() >= 2);
  CHECK(watch.changes() > before);
  CHECK(watch.watching());
}
