#pragma once
// A relay on 127.0.0.1 between clients and one TCP server that keeps every byte passing through
// it: what one who reads the network between them sees. It can also flip a bit of what a client
// sends next, as one who can rewrite that network would.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/loopback_listener.hpp"

namespace meridian::testing {

class TcpTap {
 public:
  explicit TcpTap(int server_port) : server_port_(server_port), listener_(listen_on_loopback(8)) {
    thread_ = std::thread([this] { relay(); });
  }
  ~TcpTap() {
    stop_ = true;
    thread_.join();
    for (const Pair& pair : pairs_) close_pair(pair);
    ::close(listener_.fd);
  }
  TcpTap(const TcpTap&) = delete;
  TcpTap& operator=(const TcpTap&) = delete;

  int port() const { return listener_.port; }
  std::string seen() const {
    std::lock_guard lock(mutex_);
    return seen_;
  }
  // The last byte of the next chunk a client sends has its lowest bit flipped: past any frame
  // header, inside what the frame carries.
  void flip_next_from_client() { flip_ = true; }

 private:
  struct Pair {
    int client, server;
  };

  static void close_pair(const Pair& pair) {
    ::close(pair.client);
    ::close(pair.server);
  }

  void accept_one() {
    const int client = ::accept(listener_.fd, nullptr, nullptr);
    if (client < 0) return;
    const int server = ::socket(AF_INET, SOCK_STREAM, 0);
    const sockaddr_in address = loopback_address(server_port_);
    if (server < 0 || ::connect(server, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
      ::close(client);
      if (server >= 0) ::close(server);
      return;
    }
    pairs_.push_back({client, server});
  }

  // Moves what `from` has to `to`; false when either side has closed.
  bool forward(int from, int to, bool from_client) {
    char buffer[1 << 16];
    const ssize_t n = ::recv(from, buffer, sizeof buffer, 0);
    if (n <= 0) return false;
    if (from_client && flip_.exchange(false)) buffer[n - 1] ^= 1;
    {
      std::lock_guard lock(mutex_);
      seen_.append(buffer, static_cast<std::size_t>(n));
    }
    for (ssize_t sent = 0; sent < n;) {
      const ssize_t m = ::send(to, buffer + sent, static_cast<std::size_t>(n - sent), MSG_NOSIGNAL);
      if (m <= 0) return false;
      sent += m;
    }
    return true;
  }

  // Polls in short turns so the destructor's stop is seen within one.
  void relay() {
    while (!stop_) {
      std::vector<pollfd> fds{{listener_.fd, POLLIN, 0}};
      for (const Pair& pair : pairs_) {
        fds.push_back({pair.client, POLLIN, 0});
        fds.push_back({pair.server, POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      std::vector<Pair> open;
      for (std::size_t i = 0; i < pairs_.size(); ++i) {
        const Pair pair = pairs_[i];
        const bool alive = (!fds[1 + 2 * i].revents || forward(pair.client, pair.server, true)) &&
                           (!fds[2 + 2 * i].revents || forward(pair.server, pair.client, false));
        if (alive)
          open.push_back(pair);
        else
          close_pair(pair);
      }
      pairs_ = std::move(open);
      if (fds[0].revents) accept_one();
    }
  }

  int server_port_;
  LoopbackListener listener_;
  std::atomic<bool> stop_{false}, flip_{false};
  mutable std::mutex mutex_;
  std::string seen_;
  std::vector<Pair> pairs_;  // the relay thread's only
  std::thread thread_;
};

}  // namespace meridian::testing
