#include "sync/control/etcd_client.hpp"

// g++ 12 in C++20 mode needs <utility> ahead of the Asio/Beast headers (see BUILD-NOTES).
#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <nlohmann/json.hpp>

#include "core/util/error.hpp"
#include "sync/control/base64.hpp"

namespace meridian {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Json = nlohmann::json;
using boost::system::error_code;

namespace {

// Control-plane records are small; a larger answer means something other than etcd is talking.
constexpr std::uint64_t kMaxBody = 64ull << 20;

struct Endpoint {
  std::string host, port;
  std::string name() const { return host + ":" + port; }
};

Endpoint parse_endpoint(const std::string& url) {
  std::string rest = url;
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  const auto colon = rest.rfind(':');
  if (rest.find("://") != std::string::npos || colon == std::string::npos || colon == 0 ||
      colon + 1 == rest.size() || rest.find('/') != std::string::npos)
    throw make_error(ErrorKind::Config, "etcd endpoint '", url, "': expected http://host:port");
  return {rest.substr(0, colon), rest.substr(colon + 1)};
}

Error bad_reply(const std::string& what) { return make_error(ErrorKind::Peer, "etcd: ", what); }

// etcd's gateway writes int64 fields as JSON strings and leaves out zero values.
std::int64_t int_field(const Json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) return 0;
  if (it->is_number_integer()) return it->get<std::int64_t>();
  if (!it->is_string()) throw bad_reply(std::string("field '") + name + "' is not an integer");
  const auto& s = it->get_ref<const std::string&>();
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) throw bad_reply(std::string("field '") + name + "' is not an integer");
  return v;
}

std::string bytes_field(const Json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) return {};
  if (!it->is_string()) throw bad_reply(std::string("field '") + name + "' is not a string");
  auto bytes = base64_decode(it->get_ref<const std::string&>());
  if (!bytes) throw bad_reply(std::string("field '") + name + "' is not base64");
  return std::move(*bytes);
}

bool bool_field(const Json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) return false;
  if (!it->is_boolean()) throw bad_reply(std::string("field '") + name + "' is not a boolean");
  return it->get<bool>();
}

// The key-value pairs of a range answer, checked field by field.
std::vector<std::pair<std::string, std::string>> kvs_of(const Json& reply) {
  std::vector<std::pair<std::string, std::string>> out;
  const auto it = reply.find("kvs");
  if (it == reply.end()) return out;
  if (!it->is_array()) throw bad_reply("'kvs' is not an array");
  for (const auto& kv : *it) {
    if (!kv.is_object()) throw bad_reply("an entry of 'kvs' is not an object");
    out.emplace_back(bytes_field(kv, "key"), bytes_field(kv, "value"));
  }
  return out;
}

// The smallest key greater than every key starting with `prefix`; "\0" means "no upper end".
std::string prefix_end(std::string prefix) {
  while (!prefix.empty() && static_cast<unsigned char>(prefix.back()) == 0xff) prefix.pop_back();
  if (prefix.empty()) return std::string(1, '\0');
  prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
  return prefix;
}

Json txn_put_if(Json compare, const std::string& key, const std::string& value) {
  return {{"compare", Json::array({std::move(compare)})},
          {"success", Json::array({{{"request_put", {{"key", base64_encode(key)}, {"value", base64_encode(value)}}}}})}};
}

}  // namespace

struct EtcdClient::Impl {
  std::vector<Endpoint> endpoints;
  std::chrono::milliseconds timeout;
  net::io_context ioc;

  // Drives one asynchronous operation to its end; the stream's expiry bounds it.
  void run() {
    ioc.restart();
    ioc.run();
  }

  // Posts `body` to the first endpoint that accepts a connection. Only connection failures move
  // on to the next endpoint: once a request is sent, etcd may have applied it, and a
  // compare-and-swap must not be retried blindly.
  Json call(const std::string& path, const Json& body) {
    std::string failures;
    ErrorKind kind = ErrorKind::Io;
    for (const auto& ep : endpoints) {
      beast::tcp_stream stream(ioc);
      error_code ec;
      net::ip::tcp::resolver resolver(ioc);
      const auto addresses = resolver.resolve(ep.host, ep.port, ec);
      if (!ec) {
        stream.expires_after(timeout);
        stream.async_connect(addresses, [&](error_code e, const net::ip::tcp::endpoint&) { ec = e; });
        run();
      }
      if (!ec) return exchange(stream, ep, path, body.dump());
      kind = ec == beast::error::timeout ? ErrorKind::Timeout : ErrorKind::Io;
      failures += (failures.empty() ? "" : "; ") + ep.name() + ": " + ec.message();
    }
    throw make_error(kind, "etcd: no endpoint reachable (", failures, ")");
  }

  Json exchange(beast::tcp_stream& stream, const Endpoint& ep, const std::string& path, std::string body) {
    http::request<http::string_body> req{http::verb::post, path, 11};
    req.set(http::field::host, ep.name());
    req.set(http::field::content_type, "application/json");
    req.keep_alive(false);
    req.body() = std::move(body);
    req.prepare_payload();

    error_code ec;
    stream.expires_after(timeout);
    http::async_write(stream, req, [&](error_code e, std::size_t) { ec = e; });
    run();
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxBody);
    if (!ec) {
      http::async_read(stream, buffer, parser, [&](error_code e, std::size_t) { ec = e; });
      run();
    }
    if (ec == beast::error::timeout)
      throw make_error(ErrorKind::Timeout, "etcd ", ep.name(), path, ": no answer within ", timeout.count(), " ms");
    if (ec) throw make_error(ErrorKind::Peer, "etcd ", ep.name(), path, ": ", ec.message());

    const auto& res = parser.get();
    const std::string& text = res.body();
    if (res.result() != http::status::ok)
      throw make_error(ErrorKind::Peer, "etcd ", ep.name(), path, ": HTTP ", res.result_int(), " ", text.substr(0, 200));
    Json reply = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!reply.is_object()) throw make_error(ErrorKind::Peer, "etcd ", ep.name(), path, ": answer is not a JSON object");
    // Streaming endpoints (lease keep-alive) wrap each message in "result".
    if (const auto it = reply.find("result"); it != reply.end() && it->is_object()) reply = Json(*it);
    if (const auto it = reply.find("error"); it != reply.end())
      throw make_error(ErrorKind::Peer, "etcd ", ep.name(), path, ": ", it->is_string() ? it->get<std::string>() : it->dump());
    return reply;
  }
};

EtcdClient::EtcdClient(EtcdOptions options) : impl_(std::make_unique<Impl>()) {
  if (options.endpoints.empty()) throw make_error(ErrorKind::Config, "etcd: no endpoints");
  for (const auto& url : options.endpoints) impl_->endpoints.push_back(parse_endpoint(url));
  impl_->timeout = options.timeout;
}

EtcdClient::~EtcdClient() = default;

void EtcdClient::put(const std::string& key, const std::string& value, std::int64_t lease) {
  Json body = {{"key", base64_encode(key)}, {"value", base64_encode(value)}};
  if (lease != 0) body["lease"] = std::to_string(lease);
  impl_->call("/v3/kv/put", body);
}

std::optional<std::string> EtcdClient::get(const std::string& key) {
  auto kvs = kvs_of(impl_->call("/v3/kv/range", {{"key", base64_encode(key)}}));
  if (kvs.empty()) return std::nullopt;
  if (kvs.size() != 1 || kvs[0].first != key) throw bad_reply("range for one key answered another");
  return std::move(kvs[0].second);
}

std::vector<std::pair<std::string, std::string>> EtcdClient::get_prefix(const std::string& prefix) {
  return get_prefix_since(prefix, 0).kvs;
}

EtcdClient::PrefixRead EtcdClient::get_prefix_since(const std::string& prefix, std::int64_t since) {
  Json request = {{"key", base64_encode(prefix.empty() ? std::string(1, '\0') : prefix)},
                  {"range_end", base64_encode(prefix_end(prefix))},
                  {"sort_order", "ASCEND"},
                  {"sort_target", "KEY"}};
  if (since > 0) request["min_mod_revision"] = std::to_string(since);
  const Json reply = impl_->call("/v3/kv/range", request);
  PrefixRead out;
  out.kvs = kvs_of(reply);
  const auto header = reply.find("header");
  if (header == reply.end() || !header->is_object()) throw bad_reply("range answer without a header");
  out.revision = int_field(*header, "revision");
  for (std::size_t i = 0; i < out.kvs.size(); ++i)
    if (out.kvs[i].first.rfind(prefix, 0) != 0 || (i > 0 && !(out.kvs[i - 1].first < out.kvs[i].first)))
      throw bad_reply("prefix range answered keys out of range or order");
  return out;
}

bool EtcdClient::create_if_absent(const std::string& key, const std::string& value) {
  Json compare = {{"key", base64_encode(key)}, {"result", "EQUAL"}, {"target", "CREATE"}, {"create_revision", "0"}};
  return bool_field(impl_->call("/v3/kv/txn", txn_put_if(std::move(compare), key, value)), "succeeded");
}

bool EtcdClient::compare_and_swap(const std::string& key, const std::string& expected, const std::string& value) {
  Json compare = {{"key", base64_encode(key)}, {"result", "EQUAL"}, {"target", "VALUE"}, {"value", base64_encode(expected)}};
  return bool_field(impl_->call("/v3/kv/txn", txn_put_if(std::move(compare), key, value)), "succeeded");
}

std::int64_t EtcdClient::grant_lease(std::int64_t ttl_seconds) {
  const std::int64_t id = int_field(impl_->call("/v3/lease/grant", {{"TTL", ttl_seconds}}), "ID");
  if (id == 0) throw bad_reply("lease grant answered without a lease id");
  return id;
}

void EtcdClient::keep_alive(std::int64_t lease) {
  // etcd answers a renewal of an unknown lease with a TTL of 0 rather than an error.
  if (int_field(impl_->call("/v3/lease/keepalive", {{"ID", std::to_string(lease)}}), "TTL") <= 0)
    throw make_error(ErrorKind::Peer, "etcd: lease ", lease, " has expired or was revoked");
}

void EtcdClient::revoke_lease(std::int64_t lease) { impl_->call("/v3/lease/revoke", {{"ID", std::to_string(lease)}}); }

}  // namespace meridian
