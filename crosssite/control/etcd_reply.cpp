#include "crosssite/control/etcd_reply.hpp"

#include <charconv>
#include <limits>
#include <type_traits>

#include "core/util/error.hpp"
#include "crosssite/control/base64.hpp"

namespace meridian::etcd_reply {

using Json = nlohmann::json;

namespace {

// EtcdClient::Impl::checked adds the endpoint and the path.
Error bad_reply(const std::string& what) { return make_error(ErrorKind::Peer, what); }

Error bad_field(const char* name, const char* what) {
  return bad_reply(std::string("field '") + name + "' is not " + what);
}

template <class T>
T integer_field(const Json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) return 0;
  if (it->is_number_unsigned()) {
    const auto v = it->get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) throw bad_field(name, "an integer in range");
    return static_cast<T>(v);
  }
  if (it->is_number_integer()) {  // negative
    if (std::is_unsigned_v<T>) throw bad_field(name, "an integer in range");
    return static_cast<T>(it->get<std::int64_t>());
  }
  if (!it->is_string()) throw bad_field(name, "an integer");
  const auto& s = it->get_ref<const std::string&>();
  T v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) throw bad_field(name, "an integer in range");
  return v;
}
std::int64_t int_field(const Json& j, const char* name) { return integer_field<std::int64_t>(j, name); }
// A revision, a count, a size: never below zero in etcd.
std::int64_t count_field(const Json& j, const char* name) {
  const std::int64_t v = int_field(j, name);
  if (v < 0) throw bad_field(name, "a count (it is below zero)");
  return v;
}
std::uint64_t id_field(const Json& j, const char* name) { return integer_field<std::uint64_t>(j, name); }

std::string string_field(const Json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) return {};
  if (!it->is_string()) throw bad_field(name, "a string");
  return it->get<std::string>();
}

std::string bytes_field(const Json& j, const char* name) {
  auto bytes = base64_decode(string_field(j, name));
  if (!bytes) throw bad_field(name, "base64");
  return std::move(*bytes);
}

bool bool_field(const Json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) return false;
  if (!it->is_boolean()) throw bad_field(name, "a boolean");
  return it->get<bool>();
}

// The object under `name`: a reply's "header", a watch message's "result".
const Json& object_field(const Json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end() || !it->is_object()) throw bad_field(name, "an object");
  return *it;
}

void expect_object(const Json& reply) {
  if (!reply.is_object()) throw bad_reply("the answer is not a JSON object");
}

// The key-value pairs of a range answer, checked field by field.
std::vector<std::pair<std::string, std::string>> kvs_of(const Json& reply) {
  expect_object(reply);
  std::vector<std::pair<std::string, std::string>> out;
  const auto it = reply.find("kvs");
  if (it == reply.end()) return out;
  if (!it->is_array()) throw bad_field("kvs", "an array");
  for (const auto& kv : *it) {
    if (!kv.is_object()) throw bad_reply("an entry of 'kvs' is not an object");
    out.emplace_back(bytes_field(kv, "key"), bytes_field(kv, "value"));
  }
  return out;
}

}  // namespace

std::optional<std::string> value_of(const Json& reply, const std::string& key) {
  auto kvs = kvs_of(reply);
  if (kvs.empty()) return std::nullopt;
  if (kvs.size() != 1 || kvs[0].first != key) throw bad_reply("range for one key answered another");
  return std::move(kvs[0].second);
}

ControlPlane::PrefixRead prefix_read(const Json& reply, const std::string& prefix) {
  ControlPlane::PrefixRead out;
  out.kvs = kvs_of(reply);
  out.revision = count_field(object_field(reply, "header"), "revision");
  for (std::size_t i = 0; i < out.kvs.size(); ++i)
    if (out.kvs[i].first.rfind(prefix, 0) != 0 || (i > 0 && !(out.kvs[i - 1].first < out.kvs[i].first)))
      throw bad_reply("prefix range answered keys out of range or order");
  return out;
}

EtcdClient::PrefixState prefix_state(const Json& reply) {
  expect_object(reply);
  EtcdClient::PrefixState out;
  out.count = count_field(reply, "count");
  if (const auto kvs = reply.find("kvs"); kvs != reply.end()) {
    if (!kvs->is_array() || kvs->size() > 1 || (kvs->size() == 1 && !(*kvs)[0].is_object()))
      throw bad_reply("a limit-1 range answered more than one key");
    if (kvs->size() == 1) out.newest_revision = count_field((*kvs)[0], "mod_revision");
  }
  return out;
}

bool succeeded(const Json& reply) {
  expect_object(reply);
  return bool_field(reply, "succeeded");
}

std::int64_t granted_lease(const Json& reply) {
  expect_object(reply);
  const std::int64_t id = int_field(reply, "ID");
  if (id == 0) throw bad_reply("lease grant answered without a lease id");
  return id;
}

std::int64_t renewed_ttl(const Json& reply) {
  expect_object(reply);
  return int_field(reply, "TTL");
}

std::optional<EtcdClient::LeaseTtl> time_to_live(const Json& reply) {
  expect_object(reply);
  const auto ttl = int_field(reply, "TTL");
  if (ttl < 0) return std::nullopt;
  return EtcdClient::LeaseTtl{ttl, int_field(reply, "grantedTTL")};
}

std::vector<EtcdClient::Member> members(const Json& reply) {
  expect_object(reply);
  std::vector<EtcdClient::Member> out;
  const auto it = reply.find("members");
  if (it == reply.end() || !it->is_array()) throw bad_reply("member list without 'members'");
  for (const auto& m : *it) {
    if (!m.is_object()) throw bad_reply("an entry of 'members' is not an object");
    EtcdClient::Member member{id_field(m, "ID"), string_field(m, "name"), {}};
    if (const auto urls = m.find("clientURLs"); urls != m.end()) {
      if (!urls->is_array()) throw bad_field("clientURLs", "an array");
      for (const auto& u : *urls) {
        if (!u.is_string()) throw bad_reply("a client URL is not a string");
        member.client_urls.push_back(u.get<std::string>());
      }
    }
    out.push_back(std::move(member));
  }
  return out;
}

EtcdClient::MemberStatus member_status(const Json& reply) {
  expect_object(reply);
  return {id_field(object_field(reply, "header"), "member_id"), id_field(reply, "leader"),
          string_field(reply, "version"), count_field(reply, "dbSize"), count_field(reply, "raftTerm")};
}

std::string auth_token(const Json& reply) {
  expect_object(reply);
  std::string token = string_field(reply, "token");
  if (token.empty()) throw bad_reply("the authentication answered no token");
  return token;
}

WatchLine watch_line(std::string_view line, std::span<const std::string> areas) {
  WatchLine out;
  const Json message = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!message.is_object() || message.contains("error")) return out;
  const auto it = message.find("result");
  const Json& result = it != message.end() && it->is_object() ? *it : message;
  const auto flag = [&](const char* name) {
    const auto f = result.find(name);
    return f != result.end() && f->is_boolean() && f->get<bool>();
  };
  if (flag("canceled")) return out;
  out.ok = true;
  out.created = flag("created");
  out.area_events.assign(areas.size(), 0);
  const auto events = result.find("events");
  if (events == result.end() || !events->is_array()) return out;
  for (const auto& e : *events) {
    // The event's key says which area changed; one that cannot be read may be any of them.
    std::optional<std::string> key;
    if (const auto kv = e.find("kv"); e.is_object() && kv != e.end() && kv->is_object())
      if (const auto k = kv->find("key"); k != kv->end() && k->is_string()) key = base64_decode(k->get<std::string>());
    for (std::size_t i = 0; i < areas.size(); ++i)
      if (!key || key->rfind(areas[i], 0) == 0) ++out.area_events[i];
  }
  out.events = events->size();
  return out;
}

}  // namespace meridian::etcd_reply
