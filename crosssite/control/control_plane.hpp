#pragma once
// The control plane as the cross-site protocol uses it: small records under keys, prefix reads
// with revisions, compare-and-swap, and leases. Two implementations: EtcdClient (the real one,
// etcd's JSON gateway) and MemoryControlPlane (in memory on a virtual clock, for the protocol
// simulator: linearizable, with leases that expire on virtual time and injected failures).
//
// Failures are typed alike in both (core/util/error.hpp kinds):
//   Timeout  no answer (EtcdNoQuorum: no majority or no leader where this client can reach):
//            the call may or may not have been applied
//   Io       nothing reachable
//   Peer     an answer that refuses the request (EtcdLeaseGone: the lease is not known)
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/util/error.hpp"

namespace meridian {

// The members that answered could not serve: no leader (cut off from the majority, or between
// leaders), or etcd's own request timeout; the others were unreachable. "No majority here": try
// again later, and do not act as if the call had failed for good. Kind Timeout.
class EtcdNoQuorum : public Error {
 public:
  explicit EtcdNoQuorum(const std::string& what) : Error(ErrorKind::Timeout, what) {}
};

// The control plane does not know the lease (it expired, was revoked, or never existed):
// keep_alive, and put on that lease. The owner must grant a new one and register again. Kind Peer.
class EtcdLeaseGone : public Error {
 public:
  explicit EtcdLeaseGone(const std::string& what) : Error(ErrorKind::Peer, what) {}
};

class ControlPlane {
 public:
  virtual ~ControlPlane() = default;

  virtual void put(const std::string& key, const std::string& value, std::int64_t lease = 0) = 0;
  virtual std::optional<std::string> get(const std::string& key) = 0;
  // Every key starting with `prefix` (all keys for an empty prefix), sorted by key.
  virtual std::vector<std::pair<std::string, std::string>> get_prefix(const std::string& prefix) = 0;
  // Keys under `prefix` last modified at or after revision `since` (0: all of them), sorted by key,
  // and the store's revision when it answered: pass revision + 1 next time to read only what
  // changed in between. How the commit protocol follows announcements without re-reading them.
  struct PrefixRead {
    std::vector<std::pair<std::string, std::string>> kvs;
    std::int64_t revision = 0;
  };
  virtual PrefixRead get_prefix_since(const std::string& prefix, std::int64_t since) = 0;
  // Creates key with value only if it does not exist. True if this call created it; false if the
  // key exists, which after a lost reply can be this call's own first attempt.
  virtual bool create_if_absent(const std::string& key, const std::string& value) = 0;
  // Replaces key's value only if it currently equals `expected` (a missing key never does).
  virtual bool compare_and_swap(const std::string& key, const std::string& expected, const std::string& value) = 0;

  virtual std::int64_t grant_lease(std::int64_t ttl_seconds) = 0;
  // One renewal; EtcdLeaseGone if the lease has already expired or was revoked.
  virtual void keep_alive(std::int64_t lease) = 0;
  // A lease the control plane no longer knows counts as revoked.
  virtual void revoke_lease(std::int64_t lease) = 0;
};

}  // namespace meridian
