#include "intrasite/comm/route_address.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "core/util/error.hpp"

namespace meridian {
namespace {

struct Socket {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  Socket() = default;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string endpoint_host(const std::string& endpoint) {
  constexpr std::string_view kScheme = "tcp://";
  const auto colon = endpoint.rfind(':');
  if (!endpoint.starts_with(kScheme) || colon == std::string::npos || colon <= kScheme.size())
    throw make_error(ErrorKind::Config, "store endpoint \"", endpoint, "\": expected tcp://host:port");
  return endpoint.substr(kScheme.size(), colon - kScheme.size());
}

std::string route_address_toward(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0 || found == nullptr)
    throw make_error(ErrorKind::Config, "host \"", host, "\" has no IPv4 address: ", ::gai_strerror(rc));
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found, &::freeaddrinfo);
  sockaddr_in target{};
  std::memcpy(&target, found->ai_addr, sizeof target);
  target.sin_port = htons(9);  // any port: connecting a datagram socket only picks the route

  const Socket socket;
  const int fd = socket.fd;
  if (fd < 0)
    throw make_error(ErrorKind::Peer, "no socket to find the route to \"", host, "\": ", std::strerror(errno));
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&target), sizeof target) != 0)
    throw make_error(ErrorKind::Peer, "no route from this host to \"", host, "\": ", std::strerror(errno));
  sockaddr_in local{};
  socklen_t length = sizeof local;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0)
    throw make_error(ErrorKind::Peer, "the route to \"", host, "\" has no local address: ", std::strerror(errno));
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof text);
  return text;
}

}  // namespace meridian
