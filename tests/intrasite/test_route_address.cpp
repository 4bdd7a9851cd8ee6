#include <doctest/doctest.h>

#include "intrasite/comm/route_address.hpp"
#include "tests/support/error_of.hpp"

using namespace meridian;
using meridian::testing::error_of;

TEST_CASE("endpoint_host: the host of tcp://host:port, and a clear error for anything else") {
  CHECK(endpoint_host("tcp://10.1.2.3:29500") == "10.1.2.3");
  CHECK(endpoint_host("tcp://node-7.cluster:1") == "node-7.cluster");
  for (const char* bad : {"10.1.2.3:29500", "tcp://:29500", "tcp://", "udp://10.1.2.3:1", ""}) {
    CAPTURE(bad);
    const auto what = error_of(ErrorKind::Config, [&] { endpoint_host(bad); });
    CHECK(what.find(std::string("\"") + bad + "\"") != std::string::npos);
  }
}

TEST_CASE("route_address_toward: a store on loopback is reached from loopback") {
  CHECK(route_address_toward("127.0.0.1") == "127.0.0.1");
  CHECK(route_address_toward("localhost") == "127.0.0.1");
  // Every 127/8 address is this host's own, reached through lo, whose address is 127.0.0.1.
  CHECK(route_address_toward("127.9.8.7") == "127.0.0.1");
}

TEST_CASE("route_address_toward: a host that resolves to no IPv4 address is a config error naming it") {
  const auto what = error_of(ErrorKind::Config, [] { route_address_toward(""); });
  CHECK(what.find("host \"\"") != std::string::npos);
}

TEST_CASE("listen_address_for: an address of this host is kept, loopback ones included") {
  CHECK(listen_address_for("127.0.0.1") == "127.0.0.1");
  CHECK(listen_address_for("127.9.8.7") == "127.9.8.7");  // a site of its own on one machine
  CHECK(listen_address_for("localhost") == "localhost");
  // Another host's address: this host's on the way to it (scripts/netns_site.py, a site's second host).
}
