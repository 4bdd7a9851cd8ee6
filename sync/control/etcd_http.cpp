#include "sync/control/etcd_http.hpp"

#include <boost/asio/ip/tcp.hpp>

namespace meridian {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

EtcdHttp::EtcdHttp() : work_(net::make_work_guard(ioc_)) {}

void EtcdHttp::stop() { ioc_.stop(); }

template <class Start>
EtcdHttp::error_code EtcdHttp::Connection::step(Start&& start) {
  error_code ec;
  bool done = false;
  start([&](error_code e, auto&&...) { ec = e, done = true; });
  // run_one() returns 0 only once stop() was called: the handler above then never runs.
  while (!done)
    if (http_.ioc_.run_one() == 0) return net::error::operation_aborted;
  return ec;
}

EtcdHttp::error_code EtcdHttp::Connection::connect(const std::string& host, const std::string& port,
                                                   Clock::time_point until) {
  error_code ec;
  net::ip::tcp::resolver resolver(http_.ioc_);
  const auto addresses = resolver.resolve(host, port, ec);
  resolve_failed_ = static_cast<bool>(ec);
  if (ec) return ec;
  host_ = host + ":" + port;
  stream_.expires_at(until);
  return step([&](auto handler) { stream_.async_connect(addresses, handler); });
}

EtcdHttp::error_code EtcdHttp::Connection::post(const std::string& path, const std::string& json,
                                                Clock::time_point until) {
  http::request<http::string_body> req{http::verb::post, path, 11};
  req.set(http::field::host, host_);
  req.set(http::field::content_type, "application/json");
  req.set("Grpc-Metadata-Hasleader", "true");
  req.keep_alive(false);  // one request per connection: an answer ends where the member closes it
  req.body() = json;
  req.prepare_payload();
  stream_.expires_at(until);
  return step([&](auto handler) { http::async_write(stream_, req, handler); });
}

EtcdHttp::error_code EtcdHttp::Connection::read(http::response<http::string_body>& answer, std::uint64_t max_body,
                                                Clock::time_point until) {
  http::response_parser<http::string_body> parser;
  parser.body_limit(max_body);
  stream_.expires_at(until);
  auto ec = step([&](auto handler) { http::async_read_header(stream_, buffer_, parser, handler); });
  if (ec) return ec;
  // Boost 1.74 parses a body that follows its header in the same read without checking its
  // Content-Length against the limit (async_read parses eagerly): checked here, header first.
  if (parser.content_length() && *parser.content_length() > max_body) return http::error::body_limit;
  ec = step([&](auto handler) { http::async_read(stream_, buffer_, parser, handler); });
  if (!ec) answer = parser.release();
  return ec;
}

EtcdHttp::error_code EtcdHttp::Connection::read_header(Clock::time_point until) {
  streamed_.emplace();
  streamed_->body_limit(boost::none);  // the stream lasts as long as the watch
  stream_.expires_at(until);
  return step([&](auto handler) { http::async_read_header(stream_, buffer_, *streamed_, handler); });
}

unsigned EtcdHttp::Connection::status() const { return streamed_ ? streamed_->get().result_int() : 0; }

EtcdHttp::error_code EtcdHttp::Connection::read_some(std::string& out, std::optional<Clock::time_point> until) {
  char chunk[8192];
  auto& body = streamed_->get().body();
  body.data = chunk;
  body.size = sizeof chunk;
  if (until)
    stream_.expires_at(*until);
  else
    stream_.expires_never();
  // read_some: back with whatever arrived (a message is far smaller than the buffer); a
  // whole-message read would wait for the buffer to fill.
  auto ec = step([&](auto handler) { http::async_read_some(stream_, buffer_, *streamed_, handler); });
  if (ec == http::error::need_buffer) ec = {};
  out.append(chunk, sizeof chunk - body.size);
  return ec;
}

bool EtcdHttp::Connection::ended() const { return streamed_ && streamed_->is_done(); }

void EtcdHttp::Connection::close() {
  error_code ignored;
  stream_.socket().close(ignored);
}

}  // namespace meridian
