// etcd over mutual TLS: meridian's client with the job's certificate talks to a member started
// with --client-cert-auth; a client without a certificate of the job's CA gets nothing, and etcd
// logs the refusal.
#include <doctest/doctest.h>

#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/util/error.hpp"
#include "sites/launch/etcd_member.hpp"
#include "crosssite/control/etcd_client.hpp"
#include "crosssite/control/etcd_watch.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/etcd_server.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/eventually.hpp"

using namespace meridian;
using namespace std::chrono_literals;

namespace {

EtcdOptions tls_client(const std::string& endpoint, const EtcdTls& tls) {
  EtcdOptions o{{endpoint}, 3000ms};
  o.tls = tls;
  return o;
}

// What a TLS client that shows no certificate gets for a range request: the HTTP status line, or
// the error that ended the exchange.
std::string without_certificate(const std::string& endpoint, const EtcdTls& tls) {
  namespace net = boost::asio;
  namespace ssl = net::ssl;
  const auto [host, port] = etcd_host_port(endpoint);
  net::io_context ioc;
  ssl::context context(ssl::context::tls_client);
  context.load_verify_file(tls.ca_file.string());
  ssl::stream<net::ip::tcp::socket> stream(ioc, context);
  stream.set_verify_mode(ssl::verify_peer);
  boost::system::error_code ec;
  net::connect(stream.next_layer(), net::ip::tcp::resolver(ioc).resolve(host, port), ec);
  if (!ec) stream.handshake(ssl::stream_base::client, ec);
  const std::string request = "POST /v3/kv/range HTTP/1.1\r\nHost: " + host +
                              "\r\nContent-Type: application/json\r\nContent-Length: 14\r\n\r\n{\"key\":\"Zm9v\"}";
  if (!ec) net::write(stream, net::buffer(request), ec);
  char answer[64] = {};
  if (!ec) stream.read_some(net::buffer(answer, sizeof answer - 1), ec);
  return ec ? "error: " + ec.message() : std::string(answer).substr(0, std::string(answer).find('\r'));
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("etcd with mutual TLS: the job's certificate is served, no certificate or another CA's is refused") {
  testing::EtcdServer server(/*tls=*/true);
  REQUIRE(server.endpoint().starts_with("https://127.0.0.1:"));
  EtcdClient client(tls_client(server.endpoint(), *server.tls()));
  client.put("/job/x", "1");
  CHECK(client.get("/job/x") == std::optional<std::string>("1"));
  // The same member by name: its certificate names localhost too.
  const std::string by_name = "https://localhost:" + server.endpoint().substr(server.endpoint().rfind(':') + 1);
  CHECK(EtcdClient(tls_client(by_name, *server.tls())).get("/job/x") == std::optional<std::string>("1"));

  // A certificate of another CA: etcd refuses it, and this client refuses etcd's.
  testing::TempDir other("other-ca");
  const EtcdTls stranger = write_loopback_tls(other.path());
  CHECK_THROWS_AS(EtcdClient(tls_client(server.endpoint(), stranger)).get("/job/x"), Error);
  // No certificate at all: nothing is read.
  const std::string bare = without_certificate(server.endpoint(), *server.tls());
  INFO("answer without a certificate: ", bare);
  CHECK(bare.starts_with("error: "));
  // Plaintext to the TLS port.
  CHECK_THROWS_AS(EtcdClient(EtcdOptions{{"http://" + server.endpoint().substr(8)}, 2000ms}).get("/job/x"), Error);
  CHECK(client.get("/job/x") == std::optional<std::string>("1"));  // the member is unaffected
  // etcd names every refused connection in its log.
  CHECK(read_file(server.log_path()).find("rejected connection") != std::string::npos);
}

TEST_CASE("the watch follows a TLS member too") {
  testing::EtcdServer server(/*tls=*/true);
  const auto options = tls_client(server.endpoint(), *server.tls());
  EtcdWatch watch(options, "/job/");
  EtcdClient client(options);
  REQUIRE(testing::eventually([&] { return watch.watching(); }, 10s));
  client.put("/job/k", "1");
  CHECK(testing::eventually([&] { return watch.events() >= 1; }, 10s));
}

TEST_CASE("endpoints and TLS files must agree") {
  EtcdTls files{"/nonexistent/ca.crt", "/nonexistent/a.crt", "/nonexistent/a.key"};
  CHECK(testing::error_of(ErrorKind::Config, [] { check_etcd_scheme(EtcdOptions{{"https://127.0.0.1:2379"}}); })
            .find("https needs the CA, certificate and key files") != std::string::npos);
  EtcdOptions mixed{{"https://127.0.0.1:2379", "http://127.0.0.1:2380"}};
  mixed.tls = files;
  CHECK(testing::error_of(ErrorKind::Config, [&] { check_etcd_scheme(mixed); }).find("every endpoint is https://") != std::string::npos);
  mixed.endpoints.pop_back();
  CHECK(testing::error_of(ErrorKind::Config, [&] { EtcdClient client(mixed); }).find("/nonexistent/ca.crt") != std::string::npos);
  CHECK(etcd_host_port("https://10.0.0.1:2379") == std::pair<std::string, std::string>("10.0.0.1", "2379"));
}
