#include "intrasite/comm/route_address.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

#include "core/util/error.hpp"

namespace meridian {
namespace {

struct Socket {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  Socket() = default;
  Socket(Socket&& other) noexcept : fd(std::exchange(other.fd, -1)) {}
  Socket& operator=(Socket&&) = delete;
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
};

sockaddr_in resolve(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0 || found == nullptr)
    throw make_error(ErrorKind::Config, "host \"", host, "\" has no IPv4 address: ", ::gai_strerror(rc));
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found, &::freeaddrinfo);
  sockaddr_in address{};
  std::memcpy(&address, found->ai_addr, sizeof address);
  return address;
}

Socket datagram_socket(const std::string& host) {
  Socket socket;
  if (socket.fd < 0)
    throw make_error(ErrorKind::Peer, "no socket to find the route to \"", host, "\": ", std::strerror(errno));
  return socket;
}

}  // namespace

std::string endpoint_host(const std::string& endpoint) {
  constexpr std::string_view kScheme = "tcp://";
  const auto colon = endpoint.rfind(':');
  if (!endpoint.starts_with(kScheme) || colon == std::string::npos || colon <= kScheme.size())
    throw make_error(ErrorKind::Config, "store endpoint \"", endpoint, "\": expected tcp://host:port");
  return endpoint.substr(kScheme.size(), colon - kScheme.size());
}

std::string route_address_toward(const std::string& host) {
  sockaddr_in target = resolve(host);
  target.sin_port = htons(9);  // any port: connecting a datagram socket only picks the route
  const Socket socket = datagram_socket(host);
  if (::connect(socket.fd, reinterpret_cast<const sockaddr*>(&target), sizeof target) != 0)
    throw make_error(ErrorKind::Peer, "no route from this host to \"", host, "\": ", std::strerror(errno));
  sockaddr_in local{};
  socklen_t length = sizeof local;
  if (::getsockname(socket.fd, reinterpret_cast<sockaddr*>(&local), &length) != 0)
    throw make_error(ErrorKind::Peer, "the route to \"", host, "\" has no local address: ", std::strerror(errno));
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof text);
  return text;
}

std::string listen_address_for(const std::string& host) {
  sockaddr_in own = resolve(host);
  own.sin_port = 0;
  const Socket socket = datagram_socket(host);
  // Binding succeeds exactly where the address is this host's.
  if (::bind(socket.fd, reinterpret_cast<const sockaddr*>(&own), sizeof own) == 0) return host;
  return route_address_toward(host);
}

}  // namespace meridian
