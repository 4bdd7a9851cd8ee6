#pragma once
// The site's rendezvous store over the network: the site agent runs a TcpStoreServer, replicas
// (other processes, possibly other hosts of the site) talk to it through TcpStoreClient. Requests
// and responses are Cap'n Proto (transport/schemas/store.capnp) in single ZeroMQ frames, over
// CurveZMQ: what crosses the site's network (the secret each request carries, NCCL's unique ids,
// the Gloo mesh's proof keys) can be neither read nor changed on the way.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "intrasite/comm/store.hpp"
#include "transport/link/curve.hpp"

namespace meridian {

// Rendezvous data is addresses, ids and counters; anything near these limits is a mistake, and the
// limits keep one hostile or buggy peer from making the server hold arbitrary amounts of memory.
inline constexpr std::size_t kMaxStoreKeyBytes = 4096;
inline constexpr std::size_t kMaxStoreValueBytes = std::size_t{1} << 20;

// The server's long-term CurveZMQ key pair (Z85 text, 40 characters each), derived from the site's
// secret: a client computes the server's public key from the secret it holds, so only a holder of
// the secret can finish a handshake with the store, and nothing but the secret has to reach the
// replicas. Error(Config) when this libzmq was built without CURVE.
CurveKeypair store_server_curve_keys(const std::string& secret);

// What the server makes of the requests it receives, apart from its socket: every check of a
// request, the map of keys to bytes and the parked gets. The server's thread drives one; a test or
// a fuzz target (fuzz/fuzz_store.cpp) can drive one without a network. Each answer goes to `reply`
// as the peer's routing id and the encoded StoreResponse.
class StoreRequests {
 public:
  using Reply = std::function<void(const std::string& peer, std::span<const std::byte> frame)>;
  StoreRequests(std::string secret, Reply reply);
  ~StoreRequests();
  StoreRequests(const StoreRequests&) = delete;
  StoreRequests& operator=(const StoreRequests&) = delete;

  // A message of `parts` frames from `peer`, the first of them `frame`: answered, refused or parked.
  void receive(const std::string& peer, std::span<const std::byte> frame, std::size_t parts);
  // Answers the parked gets whose time is up by `now` with a timeout failure.
  void expire(std::chrono::steady_clock::time_point now);
  // When the first parked get's time is up; nullopt when none is parked.
  std::optional<std::chrono::steady_clock::time_point> next_due() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Serves a map of keys to bytes on tcp://address:port (port 0: a free one) from its own thread, to
// clients that give its secret (any other request is refused, before its key is even read);
// stops and joins on destruction. A GET for a missing key is parked and answered when the key is
// set (or with a timeout error after the client's stated timeout), without blocking other clients.
// Malformed, oversized or wrong-version requests get an error reply; the server keeps serving.
class TcpStoreServer {
 public:
  // Error(Io) when the address cannot be bound. An empty secret is a bug (core/io/secret_file makes one).
  TcpStoreServer(const std::string& address, int port, std::string secret);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const { return port_; }
  std::string endpoint() const { return endpoint_; }  // "tcp://address:port", for TcpStoreClient

 private:
  struct Impl;  // keeps ZeroMQ and the generated schema code out of this header
  std::unique_ptr<Impl> impl_;
  std::string endpoint_;
  int port_ = 0;
};

// One per thread: ZeroMQ sockets are not thread-safe. Every call is bounded in time: Error(Timeout)
// when the server does not answer within io_timeout (get: its own timeout plus io_timeout),
// Error(Peer) when the connection drops while a call waits, the reply is malformed or the server
// refuses the request or the handshake (unauthenticated: the wrong secret). Keys longer than kMaxStoreKeyBytes and
// values longer than kMaxStoreValueBytes are refused with Error(Data) before anything is sent; an endpoint that is not
// "tcp://host:port" with Error(Config).
class TcpStoreClient final : public Store {
 public:
  TcpStoreClient(const std::string& endpoint, std::string secret,
                 std::chrono::milliseconds io_timeout = std::chrono::seconds(10));
  ~TcpStoreClient() override;
  TcpStoreClient(const TcpStoreClient&) = delete;
  TcpStoreClient& operator=(const TcpStoreClient&) = delete;

  void set(const std::string& key, std::span<const std::byte> value) override;
  std::vector<std::byte> get(const std::string& key, std::chrono::milliseconds timeout) override;
  bool check(const std::string& key) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;

  // Whether the server takes this client's secret (one call): false when it refuses it as not its
  // own, or its handshake fails (a store under another secret); Error(Timeout) or Error(Peer) as
  // any call otherwise.
  bool secret_accepted();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace meridian
