#pragma once
// A real single-member etcd on loopback for tests: free ports, a fresh data dir, ready when
// /health answers, killed and reaped at the end. ok() is false where /usr/bin/etcd is missing
// (or would not start), and the test skips itself.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "tests/support/child_process.hpp"
#include "tests/support/temp_dir.hpp"

namespace meridian::testing {

// A loopback port nobody listens on right now. Another process may take it before we bind it,
// so users retry on failure.
inline int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

// The whole answer to one plain HTTP/1.0 request, or "" if nothing answered within ~1 s.
inline std::string http_get(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

class EtcdServer {
 public:
  static constexpr const char* kBinary = "/usr/bin/etcd";

  EtcdServer() {
    if (::access(kBinary, X_OK) != 0) return;
    // A port picked above can be taken before etcd binds it; then etcd exits and we try again.
    for (int attempt = 0; attempt < 3 && !ok_; ++attempt) ok_ = start(attempt);
  }

  bool ok() const { return ok_; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  bool start(int attempt) {
    port_ = free_loopback_port();
    const int peer = free_loopback_port();
    if (port_ == 0 || peer == 0 || port_ == peer) return false;
    const std::string client = endpoint();
    const std::string peer_url = "http://127.0.0.1:" + std::to_string(peer);
    process_.reset();
    // Short raft timers: a single member elects itself after one election timeout.
    process_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{kBinary, "--name", "n1", "--data-dir", (dir_ / ("data" + std::to_string(attempt))).string(),
                                 "--listen-client-urls", client, "--advertise-client-urls", client,
                                 "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                                 "--initial-cluster", "n1=" + peer_url, "--heartbeat-interval", "10",
                                 "--election-timeout", "100", "--log-level", "warn"},
        dir_ / ("etcd" + std::to_string(attempt) + ".log"));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (std::chrono::steady_clock::now() < deadline) {
      if (http_get(port_, "/health").find("\"health\":\"true\"") != std::string::npos) return true;
      if (process_->wait_for(std::chrono::milliseconds(0))) return false;  // exited: port taken?
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  TempDir dir_{"etcd"};
  std::unique_ptr<ChildProcess> process_;
  int port_ = 0;
  bool ok_ = false;
};

}  // namespace meridian::testing
