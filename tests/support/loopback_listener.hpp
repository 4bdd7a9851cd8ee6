#pragma once
// A listening TCP socket on 127.0.0.1 and a port the kernel chose, for tests that play a server.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <doctest/doctest.h>

namespace meridian::testing {

struct LoopbackListener {
  int fd = -1;
  int port = 0;
};

inline LoopbackListener listen_on_loopback(int backlog) {
  LoopbackListener l;
  l.fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  REQUIRE(::bind(l.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(::listen(l.fd, backlog) == 0);
  REQUIRE(::getsockname(l.fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  l.port = ntohs(addr.sin_port);
  return l;
}

}  // namespace meridian::testing
