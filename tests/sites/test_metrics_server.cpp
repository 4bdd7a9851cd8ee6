// The metrics endpoint's HTTP server over 127.0.0.1: GET /metrics answers the renderer's text as
// Prometheus exposition; wrong paths, methods and malformed requests get clear errors and the
// server keeps serving; a renderer that throws costs one 500, not the site.
#include <doctest/doctest.h>

#include <atomic>
#include <stdexcept>
#include <string>

#include "core/runlog/prometheus.hpp"
#include "core/util/error.hpp"
#include "sites/site/metrics_server.hpp"
#include "tests/support/http_get.hpp"
#include "tests/support/prom_parser.hpp"

using namespace meridian;
using namespace meridian::testing;

namespace {

std::string exposition(int scrapes) {
  PromText p;
  p.family("meridian_scrapes_total", PromText::Type::Counter, "scrapes so far");
  p.sample(scrapes, {{"site", "us-east"}});
  return p.text();
}

}  // namespace

TEST_CASE("GET /metrics answers the rendered text, once per scrape, as Prometheus exposition") {
  std::atomic<int> scrapes{0};
  MetricsServer server("127.0.0.1", 0, [&] { return exposition(++scrapes); });
  REQUIRE(server.port() > 0);
  for (int i = 1; i <= 3; ++i) {
    const auto r = http_get(server.port(), "/metrics");
    CHECK(r.status == 200);
    CHECK(r.headers.find("Content-Type: text/plain; version=0.0.4") != std::string::npos);
    const auto e = parse_prometheus(r.body);
    CHECK(e.types.at("meridian_scrapes_total") == "counter");
    CHECK(e.value("meridian_scrapes_total", {{"site", "us-east"}}) == i);
  }
}

TEST_CASE("wrong paths, methods and malformed requests get 404, 405 and 400, the server serves on") {
  MetricsServer server("127.0.0.1", 0, [] { return exposition(1); });
  CHECK(http_get(server.port(), "/").status == 404);
  CHECK(http_get(server.port(), "/metricsx").status == 404);
  const auto post = http_exchange(server.port(), "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  CHECK(post.status == 405);
  const auto garbage = http_exchange(server.port(), "\x01\x02 not http at all\r\n\r\n");
  CHECK(garbage.status == 400);
  const auto with_body = http_exchange(server.port(), "GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
  CHECK(with_body.status == 400);  // a scrape has no body
  const auto huge = http_exchange(server.port(), "GET /metrics HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n");
  CHECK(huge.status == 400);
  CHECK(http_get(server.port(), "/metrics").status == 200);
  CHECK(http_get(server.port(), "/metrics?name[]=x").status == 200);
}

TEST_CASE("a renderer that throws costs that scrape a 500, not the server") {
  bool fail = true;
  MetricsServer server("127.0.0.1", 0, [&]() -> std::string {
    if (fail) throw std::runtime_error("figures unreadable");
    return exposition(1);
  });
  const auto r = http_get(server.port(), "/metrics");
  CHECK(r.status == 500);
  CHECK(r.body.find("figures unreadable") != std::string::npos);
  fail = false;
  CHECK(http_get(server.port(), "/metrics").status == 200);
}

TEST_CASE("a port in use is Error(Io) naming it, an address that is not an IP is Error(Config)") {
  MetricsServer first("127.0.0.1", 0, [] { return exposition(1); });
  try {
    MetricsServer second("127.0.0.1", first.port(), [] { return exposition(1); });
    FAIL("bound a port in use");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Io);
    CHECK(std::string(e.what()).find(std::to_string(first.port())) != std::string::npos);
  }
  CHECK_THROWS_AS(MetricsServer("localhost-ish", 0, [] { return exposition(1); }), Error);
}
