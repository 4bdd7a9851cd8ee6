#include "crosssite/control/etcd_client.hpp"

// g++ 12 in C++20 mode needs <utility> ahead of the Asio/Beast headers (see BUILD-NOTES).
#include <algorithm>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "core/util/error.hpp"
#include "crosssite/control/base64.hpp"
#include "crosssite/control/etcd_answer.hpp"
#include "crosssite/control/etcd_http.hpp"
#include "crosssite/control/etcd_reply.hpp"

namespace meridian {

namespace beast = boost::beast;
namespace http = beast::http;
using Json = nlohmann::json;

namespace {

// Control-plane records are small; a larger answer means something other than etcd is talking.
constexpr std::uint64_t kMaxBody = 64ull << 20;

Json txn_put_if(Json compare, const std::string& key, const std::string& value) {
  return {{"compare", Json::array({std::move(compare)})},
          {"success", Json::array({{{"request_put", {{"key", base64_encode(key)}, {"value", base64_encode(value)}}}}})}};
}

}  // namespace

std::pair<std::string, std::string> etcd_host_port(const std::string& url) {
  std::string rest = url;
  for (const std::string scheme : {"http://", "https://"})
    if (rest.starts_with(scheme)) rest = rest.substr(scheme.size());
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  const auto colon = rest.rfind(':');
  if (rest.find("://") != std::string::npos || colon == std::string::npos || colon == 0 ||
      colon + 1 == rest.size() || rest.find('/') != std::string::npos)
    throw make_error(ErrorKind::Config, "etcd endpoint '", url, "': expected http://host:port or https://host:port");
  return {rest.substr(0, colon), rest.substr(colon + 1)};
}

void check_etcd_scheme(const EtcdOptions& options) {
  for (const auto& url : options.endpoints) {
    if (options.tls && !url.starts_with("https://"))
      throw make_error(ErrorKind::Config, "etcd endpoint '", url, "': TLS files are given, so every endpoint is https://");
    if (!options.tls && url.starts_with("https://"))
      throw make_error(ErrorKind::Config, "etcd endpoint '", url, "': https needs the CA, certificate and key files");
  }
}

// The smallest key greater than every key starting with `prefix`; "\0" means "no upper end".
std::string etcd_prefix_end(std::string prefix) {
  while (!prefix.empty() && static_cast<unsigned char>(prefix.back()) == 0xff) prefix.pop_back();
  if (prefix.empty()) return std::string(1, '\0');
  prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
  return prefix;
}

struct EtcdClient::Impl {
  using Clock = std::chrono::steady_clock;
  struct Endpoint {
    std::string host, port;
    std::string name() const { return host + ":" + port; }
  };

  std::vector<Endpoint> endpoints;
  std::chrono::milliseconds timeout{0}, request_timeout{0};
  std::size_t preferred = 0;  // the endpoint that answered last: where the next call starts
  std::function<bool()> reachable;
  std::unique_ptr<EtcdHttp> http;  // with the client's TLS context, when it has one
  std::optional<EtcdCredentials> credentials;
  std::string token;  // etcd's, for the credentials; empty until the first request

  // How an attempt on one endpoint ended when it brought no answer to return.
  enum class Failure {
    NotSent,      // no connection, or the request not written whole: etcd saw nothing
    NoLeader,     // the member has no leader and rejected the request before doing anything
    Unavailable,  // etcd answered that it could not serve it now (its own request timeout, leader
                  // changed, stopping): a write may have been applied
    Unanswered,   // sent, then no answer in time or the connection dropped: a write may have been applied
    Garbled,      // an answer that is not etcd's
  };
  struct Failed {
    Failure failure = Failure::NotSent;
    ErrorKind kind = ErrorKind::Io;
    std::string what;
  };

  static long long ms_between(Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count();
  }

  // Posts `body` to the endpoints in turn, starting with the one that answered last, round after
  // round until one answers or the call's timeout has passed (see the header for why retrying
  // every request is safe). Another round only when something may change: an endpoint that was
  // reached but could not answer, or one that did not accept the connection in time.
  Json call(const std::string& path, const Json& body) {
    if (reachable && !reachable())
      throw EtcdNoQuorum(detail::concat("etcd ", path, ": no majority reachable (cut off by the emulated WAN's partition)"));
    const std::string text = body.dump();
    const auto start = Clock::now();
    const auto deadline = start + timeout;
    const std::size_t n = endpoints.size();
    std::vector<std::optional<Failed>> last(n);
    for (int round = 0;; ++round) {
      bool again = false;
      for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = (preferred + k) % n;
        const auto now = Clock::now();
        if (now >= deadline) break;
        const auto until = std::min(deadline, now + request_timeout);
        Failed failed;
        if (auto reply = attempt(endpoints[i], path, text, now, until, failed)) {
          preferred = i;
          return std::move(*reply);
        }
        again = again || failed.failure == Failure::NoLeader || failed.failure == Failure::Unavailable ||
                failed.failure == Failure::Unanswered || failed.kind == ErrorKind::Timeout;
        last[i] = std::move(failed);
      }
      // Short pauses first (an election on loopback takes a few hundred ms), then longer ones.
      const auto pause = std::chrono::milliseconds(std::min(200, 25 << std::min(round, 3)));
      if (!again || Clock::now() + pause >= deadline) break;
      std::this_thread::sleep_for(pause);
    }
    fail(path, last, ms_between(start, Clock::now()));
  }

  // The endpoint that answered the last call.
  std::string answered_by() const { return endpoints[preferred].name(); }

  // call(), then `check` on the answer; a malformed answer's Error names the endpoint and path.
  template <class Check>
  auto checked(const std::string& path, const Json& body, Check&& check) {
    const Json reply = call(path, body);
    try {
      return check(reply);
    } catch (const Error& e) {
      throw make_error(e.kind(), "etcd ", answered_by(), path, ": ", e.what());
    }
  }

  // The error a call ends with: every endpoint and what it last did.
  [[noreturn]] void fail(const std::string& path, const std::vector<std::optional<Failed>>& last, long long took) const {
    std::string list;
    bool no_quorum = false, timeout_seen = false, peer_seen = false;
    for (std::size_t i = 0; i < endpoints.size(); ++i) {
      list += (list.empty() ? "" : "; ") + endpoints[i].name() + ": ";
      if (!last[i]) {
        list += "not tried in time";
        continue;
      }
      list += last[i]->what;
      no_quorum = no_quorum || last[i]->failure == Failure::NoLeader || last[i]->failure == Failure::Unavailable;
      timeout_seen = timeout_seen || last[i]->kind == ErrorKind::Timeout;
      peer_seen = peer_seen || last[i]->kind == ErrorKind::Peer;
    }
    if (no_quorum)
      throw EtcdNoQuorum(detail::concat("etcd ", path, ": no majority reachable (after ", took, " ms: ", list, ")"));
    const ErrorKind kind = timeout_seen ? ErrorKind::Timeout : peer_seen ? ErrorKind::Peer : ErrorKind::Io;
    throw make_error(kind, "etcd ", path, ": no endpoint answered (after ", took, " ms: ", list, ")");
  }

  // One request to one endpoint, all of it before `until`: the answer, or nullopt with `failed`
  // saying why. An etcd error that answers this request for good is thrown. With credentials, a
  // token first if there is none, and a fresh one once should etcd no longer take it.
  std::optional<Json> attempt(const Endpoint& ep, const std::string& path, const std::string& body,
                              Clock::time_point from, Clock::time_point until, Failed& failed) {
    if (credentials && token.empty() && !authenticate(ep, from, until, failed)) return std::nullopt;
    auto answer = exchange(ep, path, body, from, until, failed);
    if (answer && answer->kind == EtcdAnswer::Kind::AuthExpired && credentials) {
      token.clear();
      if (!authenticate(ep, from, until, failed)) return std::nullopt;
      answer = exchange(ep, path, body, from, until, failed);
    }
    return answer ? settle(ep, path, std::move(*answer), failed) : std::nullopt;
  }

  // etcd's token for the credentials, from this endpoint; false with `failed` when it gave none
  // for now. Refused credentials are a Config error: no member will take them.
  bool authenticate(const Endpoint& ep, Clock::time_point from, Clock::time_point until, Failed& failed) {
    const Json request = {{"name", credentials->user}, {"password", credentials->password}};
    auto answer = exchange(ep, "/v3/auth/authenticate", request.dump(), from, until, failed);
    if (!answer) return false;
    if (answer->kind == EtcdAnswer::Kind::Refused)
      throw make_error(ErrorKind::Config, "etcd ", ep.name(), ": user ", credentials->user, " refused: ", answer->message);
    const auto reply = settle(ep, "/v3/auth/authenticate", std::move(*answer), failed);
    if (!reply) return false;
    token = etcd_reply::auth_token(*reply);
    return true;
  }

  // What one endpoint answered, or nullopt with `failed` saying why nothing came.
  std::optional<EtcdAnswer> exchange(const Endpoint& ep, const std::string& path, const std::string& body,
                                     Clock::time_point from, Clock::time_point until, Failed& failed) {
    const auto budget = ms_between(from, until);
    EtcdHttp::Connection connection(*http);
    auto ec = connection.connect(ep.host, ep.port, until);
    if (connection.resolve_failed()) {
      failed = {Failure::NotSent, ErrorKind::Io, "cannot resolve: " + ec.message()};
      return std::nullopt;
    }
    if (ec == beast::error::timeout) {
      failed = {Failure::NotSent, ErrorKind::Timeout, detail::concat("no connection within ", budget, " ms")};
      return std::nullopt;
    }
    if (ec) {
      failed = {Failure::NotSent, ErrorKind::Io, ec.message()};
      return std::nullopt;
    }
    if ((ec = connection.post(path, body, until, token))) {
      // A request not written whole is one etcd never saw whole: the server discards it.
      failed = {Failure::NotSent, ec == beast::error::timeout ? ErrorKind::Timeout : ErrorKind::Io,
                "request not sent: " + ec.message()};
      return std::nullopt;
    }
    http::response<http::string_body> res;
    ec = connection.read(res, kMaxBody, until);
    if (ec == beast::error::timeout) {
      failed = {Failure::Unanswered, ErrorKind::Timeout, detail::concat("no answer within ", budget, " ms")};
      return std::nullopt;
    }
    if (ec == http::error::end_of_stream || (ec && ec.category() != http::make_error_code(http::error::end_of_stream).category())) {
      // Closed or reset before an answer: a member killed while it held the request, say.
      failed = {Failure::Unanswered, ErrorKind::Peer, "connection lost before an answer: " + ec.message()};
      return std::nullopt;
    }
    if (ec) {
      failed = {Failure::Garbled, ErrorKind::Peer, "not an HTTP answer: " + ec.message()};
      return std::nullopt;
    }

    return classify_etcd_answer(static_cast<int>(res.result_int()), res.body());
  }

  // An answer as the caller takes it: the reply, nullopt with `failed` for one another member may
  // answer better, or thrown for one that answers the request for good.
  std::optional<Json> settle(const Endpoint& ep, const std::string& path, EtcdAnswer answer, Failed& failed) {
    switch (answer.kind) {
      case EtcdAnswer::Kind::Ok: return std::move(answer.reply);
      case EtcdAnswer::Kind::NoLeader: failed = {Failure::NoLeader, ErrorKind::Timeout, answer.message}; break;
      case EtcdAnswer::Kind::Unavailable: failed = {Failure::Unavailable, ErrorKind::Timeout, answer.message}; break;
      case EtcdAnswer::Kind::Garbled: failed = {Failure::Garbled, ErrorKind::Peer, answer.message}; break;
      case EtcdAnswer::Kind::LeaseGone:
        throw EtcdLeaseGone(detail::concat("etcd ", ep.name(), path, ": ", answer.message));
      case EtcdAnswer::Kind::Refused:
        // etcd's auth on and no user given: etcd says only this. The configuration is what is wrong.
        if (!credentials && answer.message.find("permission denied") != std::string::npos)
          throw make_error(ErrorKind::Config, "etcd ", ep.name(), path, ": ", answer.message,
                           " (is etcd's auth on? then name this site's password in [control] password_file)");
        throw make_error(ErrorKind::Peer, "etcd ", ep.name(), path, ": ", answer.message);
      case EtcdAnswer::Kind::AuthExpired:
        throw make_error(ErrorKind::Config, "etcd ", ep.name(), path, ": ", answer.message,
                         credentials ? " (again, with a token just given)"
                                     : ": etcd's auth is on; name this site's password in [control] password_file");
    }
    return std::nullopt;
  }
};

EtcdClient::EtcdClient(EtcdOptions options) : impl_(std::make_unique<Impl>()) {
  if (options.endpoints.empty()) throw make_error(ErrorKind::Config, "etcd: no endpoints");
  check_etcd_scheme(options);
  for (const auto& url : options.endpoints) {
    auto [host, port] = etcd_host_port(url);
    impl_->endpoints.push_back({std::move(host), std::move(port)});
  }
  impl_->http = std::make_unique<EtcdHttp>(options.tls);
  impl_->credentials = std::move(options.credentials);
  if (options.timeout.count() <= 0 || options.request_timeout.count() <= 0)
    throw make_error(ErrorKind::Config, "etcd: timeout and request_timeout must be > 0 ms");
  impl_->timeout = options.timeout;
  impl_->request_timeout = options.request_timeout;
  impl_->reachable = std::move(options.reachable);
}

EtcdClient::~EtcdClient() = default;

void EtcdClient::put(const std::string& key, const std::string& value, std::int64_t lease) {
  Json body = {{"key", base64_encode(key)}, {"value", base64_encode(value)}};
  if (lease != 0) body["lease"] = std::to_string(lease);
  impl_->call("/v3/kv/put", body);
}

std::optional<std::string> EtcdClient::get(const std::string& key) {
  return impl_->checked("/v3/kv/range", {{"key", base64_encode(key)}},
                        [&](const Json& reply) { return etcd_reply::value_of(reply, key); });
}

std::vector<std::pair<std::string, std::string>> EtcdClient::get_prefix(const std::string& prefix) {
  return get_prefix_since(prefix, 0).kvs;
}

EtcdClient::PrefixRead EtcdClient::get_prefix_since(const std::string& prefix, std::int64_t since) {
  Json request = {{"key", base64_encode(prefix.empty() ? std::string(1, '\0') : prefix)},
                  {"range_end", base64_encode(etcd_prefix_end(prefix))},
                  {"sort_order", "ASCEND"},
                  {"sort_target", "KEY"}};
  if (since > 0) request["min_mod_revision"] = std::to_string(since);
  return impl_->checked("/v3/kv/range", request,
                        [&](const Json& reply) { return etcd_reply::prefix_read(reply, prefix); });
}

EtcdClient::PrefixState EtcdClient::prefix_state(const std::string& prefix) {
  // count is the range's whole size whatever the limit; the one key returned is the newest.
  const Json request = {{"key", base64_encode(prefix.empty() ? std::string(1, '\0') : prefix)},
                        {"range_end", base64_encode(etcd_prefix_end(prefix))},
                        {"limit", 1},
                        {"sort_order", "DESCEND"},
                        {"sort_target", "MOD"},
                        {"keys_only", true}};
  return impl_->checked("/v3/kv/range", request, etcd_reply::prefix_state);
}

bool EtcdClient::create_if_absent(const std::string& key, const std::string& value) {
  Json compare = {{"key", base64_encode(key)}, {"result", "EQUAL"}, {"target", "CREATE"}, {"create_revision", "0"}};
  return impl_->checked("/v3/kv/txn", txn_put_if(std::move(compare), key, value), etcd_reply::succeeded);
}

bool EtcdClient::compare_and_swap(const std::string& key, const std::string& expected, const std::string& value) {
  Json compare = {{"key", base64_encode(key)}, {"result", "EQUAL"}, {"target", "VALUE"}, {"value", base64_encode(expected)}};
  return impl_->checked("/v3/kv/txn", txn_put_if(std::move(compare), key, value), etcd_reply::succeeded);
}

std::int64_t EtcdClient::grant_lease(std::int64_t ttl_seconds) {
  return impl_->checked("/v3/lease/grant", {{"TTL", ttl_seconds}}, etcd_reply::granted_lease);
}

void EtcdClient::keep_alive(std::int64_t lease) {
  // etcd answers a renewal of an unknown lease with a TTL of 0 rather than an error.
  const auto ttl = impl_->checked("/v3/lease/keepalive", {{"ID", std::to_string(lease)}}, etcd_reply::renewed_ttl);
  if (ttl <= 0) throw EtcdLeaseGone(detail::concat("etcd ", impl_->answered_by(), ": lease ", lease, " has expired or was revoked"));
}

void EtcdClient::revoke_lease(std::int64_t lease) {
  try {
    impl_->call("/v3/lease/revoke", {{"ID", std::to_string(lease)}});
  } catch (const EtcdLeaseGone&) {
    // Already gone: expired, revoked by another, or by this call's own first attempt.
  }
}

std::optional<EtcdClient::LeaseTtl> EtcdClient::lease_time_to_live(std::int64_t lease) {
  // An unknown lease answers TTL -1, or the error "lease not found".
  try {
    return impl_->checked("/v3/lease/timetolive", {{"ID", std::to_string(lease)}}, etcd_reply::time_to_live);
  } catch (const EtcdLeaseGone&) {
    return std::nullopt;
  }
}

std::vector<EtcdClient::Member> EtcdClient::member_list() {
  return impl_->checked("/v3/cluster/member/list", Json::object(), etcd_reply::members);
}

EtcdClient::MemberStatus EtcdClient::status() {
  return impl_->checked("/v3/maintenance/status", Json::object(), etcd_reply::member_status);
}

Json EtcdClient::request(const std::string& path, const Json& body) { return impl_->call(path, body); }

std::string EtcdClient::auth_token(bool renew) {
  if (renew) impl_->token.clear();
  // Any request authenticates first when there is no token: the cheapest one, which every user may make.
  if (impl_->credentials && impl_->token.empty()) impl_->call("/v3/maintenance/status", Json::object());
  return impl_->token;
}

}  // namespace meridian
