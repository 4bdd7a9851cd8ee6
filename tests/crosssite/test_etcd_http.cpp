// EtcdHttp, the HTTP path the etcd client and its watch share, against a scripted server on
// loopback: the request it writes, a whole answer, a streamed one, a deadline, and stop().
#include <doctest/doctest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "crosssite/control/etcd_http.hpp"

namespace meridian {
namespace {

using namespace std::chrono_literals;
namespace http = boost::beast::http;

// One loopback connection, served by the test's own thread: what the client wrote is read up
// to the end of its body, then the test answers with whatever bytes it likes.
class ScriptedServer {
 public:
  ScriptedServer() {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(listener_, 1) == 0);
    socklen_t length = sizeof address;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = std::to_string(ntohs(address.sin_port));
  }
  ~ScriptedServer() {
    if (client_ >= 0) ::close(client_);
    ::close(listener_);
  }
  const std::string& port() const { return port_; }

  // Accepts the connection and reads one request; its head and body, as written.
  std::string take_request() {
    client_ = ::accept(listener_, nullptr, nullptr);
    std::string text;
    char buffer[4096];
    while (text.find("\r\n\r\n") == std::string::npos || text.size() < request_size(text)) {
      const auto n = ::read(client_, buffer, sizeof buffer);
      if (n <= 0) break;
      text.append(buffer, static_cast<std::size_t>(n));
    }
    return text;
  }
  void answer(const std::string& bytes) { CHECK(::write(client_, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size())); }

 private:
  static std::size_t request_size(const std::string& text) {
    const auto head = text.find("\r\n\r\n") + 4;
    const auto at = text.find("Content-Length: ");
    return head + (at == std::string::npos ? 0 : std::stoul(text.substr(at + 16)));
  }

  int listener_ = -1, client_ = -1;
  std::string port_;
};

EtcdHttp::Clock::time_point in(std::chrono::milliseconds ms) { return EtcdHttp::Clock::now() + ms; }

// A connection that has posted one request, which the server has read (`request`).
struct Posted {
  ScriptedServer server;
  EtcdHttp http;
  EtcdHttp::Connection connection{http};
  std::string request;

  explicit Posted(const std::string& path, const std::string& json = "{}") {
    REQUIRE_FALSE(connection.connect("127.0.0.1", server.port(), in(5s)));
    auto taken = std::async(std::launch::async, [&] { return server.take_request(); });
    REQUIRE_FALSE(connection.post(path, json, in(5s)));
    request = taken.get();
  }
};

}  // namespace

TEST_CASE("etcd http: a POST carries etcd's headers and its JSON, and the whole answer comes back") {
  Posted p("/v3/kv/range", R"({"key":"YQ=="})");
  const std::string& text = p.request;
  CHECK(text.starts_with("POST /v3/kv/range HTTP/1.1\r\n"));
  CHECK(text.find("Host: 127.0.0.1:" + p.server.port() + "\r\n") != std::string::npos);
  CHECK(text.find("Content-Type: application/json\r\n") != std::string::npos);
  CHECK(text.find("Grpc-Metadata-Hasleader: true\r\n") != std::string::npos);
  CHECK(text.find("Connection: close\r\n") != std::string::npos);
  CHECK(text.ends_with("\r\n\r\n{\"key\":\"YQ==\"}"));

  p.server.answer("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 13\r\n\r\n{\"code\":14}\r\n");
  http::response<http::string_body> answer;
  REQUIRE_FALSE(p.connection.read(answer, 1 << 20, in(5s)));
  CHECK(answer.result_int() == 503);
  CHECK(answer.body() == "{\"code\":14}\r\n");
}

TEST_CASE("etcd http: an answer over its size limit is an error, not a buffer without end") {
  Posted p("/v3/kv/range");
  p.server.answer("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + std::string(100, 'x'));
  http::response<http::string_body> answer;
  CHECK(p.connection.read(answer, 10, in(5s)) == http::error::body_limit);
}

TEST_CASE("etcd http: a chunked answer over the size limit is an error too") {
  Posted p("/v3/kv/range");
  p.server.answer("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n01234567\r\n8\r\n89abcdef\r\n0\r\n\r\n");
  http::response<http::string_body> answer;
  CHECK(p.connection.read(answer, 10, in(5s)) == http::error::body_limit);
}

TEST_CASE("etcd http: a streamed answer comes as it arrives, line by line, until it ends") {
  Posted p("/v3/watch");
  p.server.answer("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
  REQUIRE_FALSE(p.connection.read_header(in(5s)));
  CHECK(p.connection.status() == 200);
  std::string got;
  p.server.answer("10\r\n{\"created\":true}\r\n");
  while (got.size() < 16) REQUIRE_FALSE(p.connection.read_some(got, std::nullopt));
  CHECK(got == "{\"created\":true}");
  CHECK_FALSE(p.connection.ended());
  p.server.answer("2\r\n\n\n\r\n0\r\n\r\n");
  while (!p.connection.ended()) REQUIRE_FALSE(p.connection.read_some(got, std::nullopt));
  CHECK(got == "{\"created\":true}\n\n");
}

TEST_CASE("etcd http: a member that takes the request and never answers costs its deadline") {
  Posted p("/v3/kv/put");
  http::response<http::string_body> answer;
  CHECK(p.connection.read(answer, 1 << 20, in(50ms)) == boost::beast::error::timeout);
  // An address that does not resolve says so, apart from a refused p.connection.
  EtcdHttp::Connection nowhere(p.http);
  CHECK(nowhere.connect("127.0.0.1", "no-such-service", in(5s)));
  CHECK(nowhere.resolve_failed());
  CHECK_FALSE(p.connection.resolve_failed());
}

TEST_CASE("etcd http: stop() from another thread ends a read that has no deadline, and every later step") {
  Posted p("/v3/watch");
  p.server.answer("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
  REQUIRE_FALSE(p.connection.read_header(in(5s)));
  // Stopped before or during the read: either way it ends, aborted.
  std::thread stopper([&] { p.http.stop(); });
  std::string got;
  CHECK(p.connection.read_some(got, std::nullopt) == boost::asio::error::operation_aborted);
  stopper.join();
  EtcdHttp::Connection later(p.http);
  CHECK(later.connect("127.0.0.1", p.server.port(), in(5s)) == boost::asio::error::operation_aborted);
}

}  // namespace meridian
