#pragma once
// A bare HTTP/1.1 exchange over 127.0.0.1 for tests: sends `request` as given (so tests can send
// malformed ones too), reads until the server closes, and splits status, headers and body.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace meridian::testing {

struct HttpReply {
  int status = 0;
  std::string headers;  // the header block, lines as sent
  std::string body;
};

inline HttpReply http_exchange(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket failed");
  timeval limit{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &at.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot connect to 127.0.0.1:" + std::to_string(port));
  }
  for (std::size_t sent = 0; sent < request.size();) {
    const auto n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  std::string raw;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) raw.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  HttpReply r;
  const auto head_end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || head_end == std::string::npos)
    throw std::runtime_error("not an HTTP/1.1 reply: '" + raw.substr(0, 80) + "'");
  r.status = std::stoi(raw.substr(9, 3));
  r.headers = raw.substr(0, head_end);
  r.body = raw.substr(head_end + 4);
  return r;
}

inline HttpReply http_get(int port, const std::string& path) {
  return http_exchange(port, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
}

}  // namespace meridian::testing
