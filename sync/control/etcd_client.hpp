#pragma once
// A small etcd v3 client over the JSON gateway (HTTP/1.1 POST to /v3/...), enough for the control
// plane: small records, compare-and-swap commits and membership keys on leases.
//
// Errors: Io when no endpoint accepts a connection, Timeout when one does not answer within
// options.timeout, Peer when the answer is not what etcd sends (bad HTTP, bad JSON, an etcd error).
// A client is used from one thread at a time; give each thread its own.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace meridian {

struct EtcdOptions {
  std::vector<std::string> endpoints;  // "http://127.0.0.1:2379" or "127.0.0.1:2379"
  // Bounds the connection to one endpoint, and separately the request and answer on it.
  std::chrono::milliseconds timeout{5000};
};

class EtcdClient {
 public:
  // Throws Error(Config) for an empty or malformed endpoint list.
  explicit EtcdClient(EtcdOptions options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  void put(const std::string& key, const std::string& value, std::int64_t lease = 0);
  std::optional<std::string> get(const std::string& key);
  // Every key starting with `prefix` (all keys for an empty prefix), sorted by key.
  std::vector<std::pair<std::string, std::string>> get_prefix(const std::string& prefix);
  // Keys under `prefix` last modified at or after revision `since` (0: all of them), sorted by key,
  // and the store's revision when it answered: pass revision + 1 next time to read only what
  // changed in between. How the commit protocol follows announcements without re-reading them.
  struct PrefixRead {
    std::vector<std::pair<std::string, std::string>> kvs;
    std::int64_t revision = 0;
  };
  PrefixRead get_prefix_since(const std::string& prefix, std::int64_t since);
  // Creates key with value only if it does not exist. True if this call won.
  bool create_if_absent(const std::string& key, const std::string& value);
  // Replaces key's value only if it currently equals `expected` (a missing key never does).
  bool compare_and_swap(const std::string& key, const std::string& expected, const std::string& value);

  std::int64_t grant_lease(std::int64_t ttl_seconds);
  // One renewal; Error(Peer) if the lease has already expired or was revoked.
  void keep_alive(std::int64_t lease);
  void revoke_lease(std::int64_t lease);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace meridian
