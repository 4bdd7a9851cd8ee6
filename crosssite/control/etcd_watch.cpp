#include "crosssite/control/etcd_watch.hpp"

// g++ 12 in C++20 mode needs <utility> ahead of the Asio/Beast headers (see BUILD-NOTES).
#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/util/error.hpp"
#include "crosssite/control/base64.hpp"
#include "crosssite/control/etcd_http.hpp"
#include "crosssite/control/etcd_reply.hpp"

namespace meridian {

namespace net = boost::asio;
namespace beast = boost::beast;
using Json = nlohmann::json;

namespace {

// A message longer than this is not etcd's (a batch of the control plane's small records).
constexpr std::size_t kMaxLine = 16u << 20;

}  // namespace

struct EtcdWatch::Stream {
  explicit Stream(const std::optional<EtcdTls>& tls) : http(tls) {}
  EtcdHttp http;
};

EtcdWatch::EtcdWatch(const EtcdOptions& options, std::string prefix, std::chrono::milliseconds probe_every,
                     std::vector<std::string> areas)
    : options_(options),
      prefix_(std::move(prefix)),
      probe_every_(probe_every),
      areas_(std::move(areas)),
      area_changes_(std::make_unique<std::atomic<std::uint64_t>[]>(areas_.size())),
      stream_(std::make_unique<Stream>(options.tls)) {
  if (options.endpoints.empty()) throw make_error(ErrorKind::Config, "etcd watch: no endpoints");
  check_etcd_scheme(options);
  for (const auto& url : options.endpoints) endpoints_.push_back(etcd_host_port(url));
  prober_ = std::make_unique<EtcdClient>(options_);
  thread_ = std::thread([this] { run(); });
}

EtcdWatch::~EtcdWatch() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  stream_->http.stop();  // the thread's step in progress ends; it sees stop_ before another
  cv_.notify_all();
  thread_.join();
}

void EtcdWatch::run() {
  std::size_t next = 0;
  int failures = 0;
  while (!stop_) {
    const auto& [host, port] = endpoints_[next++ % endpoints_.size()];
    const bool established = follow(host, port, failures > 0);
    watching_ = false;
    failures = established ? 0 : failures + 1;
    // At once to the next member after a stream that worked; then 50 ms growing to 1 s.
    const auto pause = std::chrono::milliseconds(failures == 0 ? 0 : std::min(1000, 25 << std::min(failures, 6)));
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, pause, [this] { return stop_.load(); });
  }
}

bool EtcdWatch::follow(const std::string& host, const std::string& port, bool renew_token) {
  // Under etcd's auth the stream is made with the prober's token; after a failure a fresh one, in
  // case etcd no longer took the old.
  std::string token;
  try {
    token = prober_->auth_token(renew_token);
  } catch (const Error&) {
    return false;  // no member gave one: tried again after the pause
  }
  EtcdHttp& http = stream_->http;
  EtcdHttp::Connection connection(http);
  // Until etcd confirms the watch, a member that took the request but does not answer costs one
  // timeout; from then on the stream is quiet as long as nothing changes.
  const auto until = EtcdHttp::Clock::now() + options_.request_timeout;
  const Json request = {
      {"create_request", {{"key", base64_encode(prefix_)}, {"range_end", base64_encode(etcd_prefix_end(prefix_))}}}};
  if (connection.connect(host, port, until) || connection.post("/v3/watch", request.dump(), until, token) ||
      connection.read_header(until) || connection.status() != 200)
    return false;

  // The probes run on this thread between the stream's reads; one that finds the stream silent
  // twice closes it, which ends the read below.
  net::steady_timer timer(http.context());
  bool timer_pending = false;
  std::function<void()> arm = [&] {
    timer_pending = true;
    timer.expires_after(probe_every_);
    timer.async_wait([&](beast::error_code e) {
      timer_pending = false;
      if (e || stop_) return;
      if (watching_ && probe()) {
        connection.close();
        return;
      }
      arm();
    });
  };
  arm();
  std::string pending;
  bool ok = true;
  while (ok && !connection.ended()) {
    const auto ec = connection.read_some(pending, watching_ ? std::nullopt : std::optional(until));
    if (stop_) return watching_;  // the context is stopped: nothing on it runs again
    if (ec) break;
    for (std::size_t end; ok && (end = pending.find('\n')) != std::string::npos;) {
      const std::string line = pending.substr(0, end);
      pending.erase(0, end + 1);
      ok = line.empty() || handle(line);
    }
    ok = ok && pending.size() <= kMaxLine;
  }
  // The timer's handler refers to this frame: let it run (cancelled) before leaving.
  timer.cancel();
  while (timer_pending && !stop_)
    if (http.context().run_one() == 0) break;
  probed_.reset();
  silent_probes_ = 0;
  return watching_;
}

bool EtcdWatch::handle(const std::string& line) {
  const auto read = etcd_reply::watch_line(line, areas_);
  if (!read.ok) return false;
  if (read.created) {
    // What changed before the watch began is unknown: a change for the reader, published first.
    changed_everywhere();
    watching_ = true;
  }
  if (read.events == 0) return true;
  for (std::size_t i = 0; i < areas_.size(); ++i) area_changes_[i] += read.area_events[i];
  events_ += read.events;
  ++changes_;
  return true;
}

void EtcdWatch::changed_everywhere() {
  for (std::size_t i = 0; i < areas_.size(); ++i) ++area_changes_[i];
  ++changes_;
}

bool EtcdWatch::probe() {
  EtcdClient::PrefixState now;
  try {
    now = prober_->prefix_state(prefix_);
  } catch (const Error&) {
    return false;  // no member answered: the probe learns nothing, the stream may be fine
  }
  const bool silent = probed_ && now != *probed_ && events_.load() == events_at_probe_;
  probed_ = now;
  events_at_probe_ = events_.load();
  if (!silent) {
    silent_probes_ = 0;
    return false;
  }
  ++missed_;
  changed_everywhere();
  return ++silent_probes_ >= 2;
}

}  // namespace meridian
