#pragma once
// A small etcd v3 client over the JSON gateway (HTTP/1.1 POST to /v3/...), enough for the control
// plane: small records, compare-and-swap commits and membership keys on leases.
//
// Endpoints and failover. The client is given every member of the cluster. A call starts with
// the endpoint that last answered and moves on to the next one when an attempt fails: no
// connection, no answer within options.request_timeout (a stopped or cut-off member still accepts
// TCP connections: only the timeout tells), the connection dropped, or etcd answering that it
// cannot serve now (no leader, its own request timeout). It goes round the endpoints, with a short
// pause between rounds, until one answers or options.timeout has passed; a leader election in
// the middle of a call is ridden out that way. It does not go round again when every endpoint
// refused the connection (nothing runs there) or sent something that is not etcd.
//
// Every call is retried like that, writes included, and this is what makes that safe:
//  * Reads (get, get_prefix, get_prefix_since) are linearizable (etcd's default): the member
//    confirms with the leader that it has applied everything committed, so any member answers
//    with data at least as new as any earlier answer, and a member cut off from the majority
//    fails the read rather than return stale data. Revisions never go back across a failover.
//  * Every request carries gRPC metadata hasleader=true: a member without a leader (cut off from
//    the majority, or between leaders) rejects it before doing anything, at once, rather than
//    after etcd's own 5+ s request timeout. When that is what the reachable members said, the
//    call throws EtcdNoQuorum (below).
//  * A write whose attempt ended without an answer may have been applied, then or later (the
//    member that took it may propose it when it resumes). Retried, put writes the same value
//    again; grant_lease may leave an extra lease nobody uses, which expires after its TTL;
//    revoke_lease finds the lease gone, which counts as revoked; keep_alive renews once more.
//  * create_if_absent and compare_and_swap are transactions guarded by a comparison, so an
//    attempt applied twice, or late, writes nothing unless its comparison holds then: a key is
//    never created twice, and a swap only ever replaces the value it expects. But the answer can be a false negative: when the
//    first attempt won without its answer arriving, the retry finds the key already there (or
//    already swapped) and returns false. A caller that must know reads the key back and
//    compares it with its own value (the commit protocol does: it reads the winning commit and
//    applies whatever it holds, so a lost win only means it counts the commit as another's).
//
// Errors (core/util/error.hpp kinds; every message names the endpoints and what each did):
//   Io       no endpoint accepted a connection
//   Timeout  attempts that reached a member got no answer in time; EtcdNoQuorum is a Timeout too
//   Peer     an answer that is not what etcd sends (bad HTTP, bad JSON), or an etcd error that
//            is an answer to this request (etcd refused it); EtcdLeaseGone is a Peer too
// A client is used from one thread at a time; give each thread its own.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/util/error.hpp"
#include "crosssite/control/control_plane.hpp"
#include "crosssite/control/etcd_tls.hpp"

namespace meridian {

struct EtcdOptions {
  // "http://127.0.0.1:2379" or "127.0.0.1:2379"; every member. "https://..." (all of them, then)
  // when `tls` is given: mutual TLS with the files it names.
  std::vector<std::string> endpoints;
  // The most one call may take, all its attempts on all endpoints together.
  std::chrono::milliseconds timeout{5000};
  // The most one attempt on one endpoint may take, from connecting to the last byte of the answer,
  // before the client gives up on it and tries the next: what a stopped member costs a call.
  // Keep it above the cluster's slowest healthy answer (a write is a round trip to the leader
  // and one from it to a majority). A single endpoint is tried again after it, like a round of
  // several: a member that lost its leader holds a request for etcd's own 5+ s request timeout,
  // but refuses the next one at once.
  std::chrono::milliseconds request_timeout{1000};
  // The emulated WAN's hook (sim/emulator): while it returns false this site is cut off from the
  // control plane, and every call fails at once with EtcdNoQuorum, as a site whose own member
  // lost its majority is told. A real partition makes a call take up to `timeout` first (the
  // members beyond it do not answer); the emulation does not charge that wait. Empty: always
  // reachable. Called from whichever thread uses the client.
  std::function<bool()> reachable{};
  std::optional<EtcdTls> tls{};
  // With etcd's auth on: the user every request is made as. The client authenticates on its first
  // request and again whenever etcd no longer takes its token (expired, or the auth store changed).
  std::optional<EtcdCredentials> credentials{};
};

// The end of the key range that holds every key starting with `prefix` (etcd's range_end).
std::string etcd_prefix_end(std::string prefix);
// "http(s)://host:port" or "host:port" -> {host, port}; Error(Config) for anything else.
std::pair<std::string, std::string> etcd_host_port(const std::string& url);
// Error(Config) unless the endpoints' scheme and the TLS files agree: https:// for every endpoint
// with `tls`, none without (a client would otherwise speak plaintext to a TLS port, or the reverse).
void check_etcd_scheme(const EtcdOptions& options);

class EtcdClient final : public ControlPlane {
 public:
  // Throws Error(Config) for an empty or malformed endpoint list.
  explicit EtcdClient(EtcdOptions options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  void put(const std::string& key, const std::string& value, std::int64_t lease = 0) override;
  std::optional<std::string> get(const std::string& key) override;
  // Every key starting with `prefix` (all keys for an empty prefix), sorted by key.
  std::vector<std::pair<std::string, std::string>> get_prefix(const std::string& prefix) override;
  PrefixRead get_prefix_since(const std::string& prefix, std::int64_t since) override;
  // One cheap look at a prefix: how many keys it holds and the newest one's mod revision. Any
  // put under it moves the revision, any delete the count (EtcdWatch checks itself with it).
  struct PrefixState {
    std::int64_t count = 0;
    std::int64_t newest_revision = 0;
    bool operator==(const PrefixState&) const = default;
  };
  PrefixState prefix_state(const std::string& prefix);
  // Creates key with value only if it does not exist. True if this call created it; false if the
  // key exists, which after a failover can be this call's own first attempt (see above).
  bool create_if_absent(const std::string& key, const std::string& value) override;
  // Replaces key's value only if it currently equals `expected` (a missing key never does). True if
  // this call swapped it; false otherwise, which after a failover can be this call's own first
  // attempt (see above).
  bool compare_and_swap(const std::string& key, const std::string& expected, const std::string& value) override;

  std::int64_t grant_lease(std::int64_t ttl_seconds) override;
  // One renewal; EtcdLeaseGone if the lease has already expired or was revoked.
  void keep_alive(std::int64_t lease) override;
  // A lease etcd no longer knows counts as revoked.
  void revoke_lease(std::int64_t lease) override;
  // Seconds left and seconds granted; nullopt when etcd no longer knows the lease (expired, revoked).
  struct LeaseTtl {
    std::int64_t remaining_s = 0, granted_s = 0;
  };
  std::optional<LeaseTtl> lease_time_to_live(std::int64_t lease);

  // The cluster as the answering member knows it, for an operator's view of the control plane.
  struct Member {
    std::uint64_t id = 0;
    std::string name;
    std::vector<std::string> client_urls;
  };
  std::vector<Member> member_list();
  // The answering member's own view (give the client that one member's endpoint to ask it).
  struct MemberStatus {
    std::uint64_t id = 0, leader = 0;  // leader 0: it knows none
    std::string version;
    std::int64_t db_size = 0, raft_term = 0;
  };
  MemberStatus status();

  // Any other call of etcd's v3 API (auth and role administration: crosssite/control/etcd_auth), its
  // answer as etcd gives it; an etcd error is Error(Peer) naming it.
  nlohmann::json request(const std::string& path, const nlohmann::json& body);
  // The token this client's requests carry now, authenticating first if it holds none or `renew`
  // (etcd refused it); empty without credentials. For the watch, whose stream is made with it.
  std::string auth_token(bool renew = false);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace meridian
