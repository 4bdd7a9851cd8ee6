#pragma once
// A listening TCP socket on 127.0.0.1 and a port the kernel chose, for tests that play a server.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>

#include <doctest/doctest.h>

namespace meridian::testing {

struct LoopbackListener {
  int fd = -1;
  int port = 0;
};

inline sockaddr_in loopback_address(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  return addr;
}

inline LoopbackListener listen_on_loopback(int backlog) {
  LoopbackListener l;
  l.fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = loopback_address(0);
  socklen_t len = sizeof(addr);
  REQUIRE(::bind(l.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(::listen(l.fd, backlog) == 0);
  REQUIRE(::getsockname(l.fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  l.port = ntohs(addr.sin_port);
  return l;
}

// A port for a server whose port a launcher fixes before it starts (MASTER_PORT), outside the
// kernel's ephemeral range: a port probed with bind(0) and closed lies inside that range, where a
// parallel test's bind(0) or outgoing connection can take it before the server binds it.
inline int fixed_loopback_port() {
  int low = 32768, high = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
  const int span = 8000;
  const int first = low - span >= 1024 ? low - span : high + 1;  // below the range, else above it
  REQUIRE(first + span <= 65536);
  for (int attempt = 0; attempt < 64; ++attempt) {
    const auto step = static_cast<std::uint64_t>(::getpid()) * 7919 + static_cast<std::uint64_t>(attempt) * 104729;
    const int port = first + static_cast<int>(step % span);
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    const sockaddr_in addr = loopback_address(port);
    const bool free = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    if (free) return port;
  }
  FAIL("no free port outside the ephemeral range (", low, "-", high, ") in 64 tries");
  return 0;
}

}  // namespace meridian::testing
