#pragma once
// A small HTTP/1.1 server for Prometheus scrapes: GET /metrics answers with what `render` returns
// (text exposition), anything else gets 404 or 405, a malformed or oversized request 400, and a
// client that stalls is dropped after a few seconds. It runs on its own thread (Boost.Beast,
// asynchronous, one connection at a time is plenty for a scraper) and stops on destruction.
#include <functional>
#include <memory>
#include <string>

namespace meridian {

class MetricsServer {
 public:
  // Error(Io) when address:port cannot be bound; port 0 takes a free one. `render` is called on
  // the server's thread, once per scrape.
  MetricsServer(const std::string& address, int port, std::function<std::string()> render);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const { return port_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace meridian
