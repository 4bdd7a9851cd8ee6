#pragma once
// What each of EtcdClient's calls, and EtcdWatch's stream, read from etcd's JSON: pure functions
// of an answer's reply (classify_etcd_answer's, a JSON object) or of one line of the stream. A
// field is checked before it is used, so an answer that is not what etcd writes is an
// Error(Peer) naming the field, never a crash, an exception of the JSON library's or a value
// read wrong (a number out of its type's range). Unit-tested without an etcd
// (tests/crosssite/test_etcd_reply.cpp) and fuzzed (fuzz/fuzz_etcd_reply.cpp).
//
// etcd's gateway writes int64 and uint64 fields (revisions, TTLs, lease and member ids) as JSON
// strings, and leaves out zero values: a missing integer reads 0, a missing string "", a missing
// boolean false.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "crosssite/control/etcd_client.hpp"

namespace meridian::etcd_reply {

// A range of one key: its value, nullopt when absent; an answer naming another key is refused.
std::optional<std::string> value_of(const nlohmann::json& reply, const std::string& key);
// A range of a prefix, sorted by key: every key under the prefix, in order, and the revision read.
ControlPlane::PrefixRead prefix_read(const nlohmann::json& reply, const std::string& prefix);
// A count-only range limited to its newest key (EtcdClient::prefix_state).
EtcdClient::PrefixState prefix_state(const nlohmann::json& reply);
// A transaction: whether its comparison held.
bool succeeded(const nlohmann::json& reply);
// A lease grant: the lease's id, never 0.
std::int64_t granted_lease(const nlohmann::json& reply);
// A renewal: the seconds left (0 or less: the lease is gone).
std::int64_t renewed_ttl(const nlohmann::json& reply);
// A lease's time to live; nullopt when etcd no longer knows it (TTL -1).
std::optional<EtcdClient::LeaseTtl> time_to_live(const nlohmann::json& reply);
std::vector<EtcdClient::Member> members(const nlohmann::json& reply);
EtcdClient::MemberStatus member_status(const nlohmann::json& reply);
// An authentication: its token, never empty.
std::string auth_token(const nlohmann::json& reply);

// One line of a watch stream, and what it says of the watch's areas (key prefixes).
struct WatchLine {
  bool ok = false;       // a message of a live watch: false for anything else (an error, a cancel)
  bool created = false;  // the watch has begun: what changed before is unknown
  std::uint64_t events = 0;
  // Per area, its events: those whose key is under it, and those whose key cannot be read.
  std::vector<std::uint64_t> area_events;
};
// Never throws: a line that is not a watch message reads as not ok.
WatchLine watch_line(std::string_view line, std::span<const std::string> areas);

}  // namespace meridian::etcd_reply
