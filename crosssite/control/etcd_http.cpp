#include "crosssite/control/etcd_http.hpp"

#include <openssl/ssl.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>

#include "core/util/error.hpp"

namespace meridian {

namespace net = boost::asio;
namespace ssl = net::ssl;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

// TLS 1.2 at least, the peer verified against the job's CA alone (not the system's store: any
// public CA could vouch for an impostor), and this side's certificate shown.
ssl::context client_context(const EtcdTls& tls) {
  ssl::context context(ssl::context::tls_client);
  context.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                      ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  const auto load = [](const std::filesystem::path& file, const char* what, auto&& use) {
    boost::system::error_code ec;
    use(file.string(), ec);
    if (ec) throw make_error(ErrorKind::Config, "etcd TLS: cannot use ", what, " ", file.string(), ": ", ec.message());
  };
  load(tls.ca_file, "CA certificate", [&](const std::string& f, auto& ec) { context.load_verify_file(f, ec); });
  load(tls.cert_file, "certificate", [&](const std::string& f, auto& ec) { context.use_certificate_chain_file(f, ec); });
  load(tls.key_file, "private key",
       [&](const std::string& f, auto& ec) { context.use_private_key_file(f, ssl::context::pem, ec); });
  context.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  return context;
}

}  // namespace

EtcdHttp::EtcdHttp(const std::optional<EtcdTls>& tls) : work_(net::make_work_guard(ioc_)) {
  if (tls) tls_.emplace(client_context(*tls));
}

EtcdHttp::Connection::Connection(EtcdHttp& http)
    : http_(http),
      stream_(http.tls_ ? decltype(stream_)(std::in_place_index<1>, http.ioc_, *http.tls_)
                        : decltype(stream_)(std::in_place_index<0>, http.ioc_)) {}

template <class Op>
EtcdHttp::error_code EtcdHttp::Connection::io(Op&& op) {
  return std::visit([&](auto& stream) { return step([&](auto handler) { op(stream, handler); }); }, stream_);
}

beast::tcp_stream& EtcdHttp::Connection::tcp() {
  return std::visit([](auto& s) -> beast::tcp_stream& { return beast::get_lowest_layer(s); }, stream_);
}

EtcdHttp::error_code EtcdHttp::Connection::handshake(const std::string& host) {
  auto* tls = std::get_if<1>(&stream_);
  if (!tls) return {};
  error_code not_address;
  net::ip::make_address(host, not_address);
  // SNI takes names only; an address is checked against the certificate's IP entries.
  if (not_address && !SSL_set_tlsext_host_name(tls->native_handle(), host.c_str()))
    return {static_cast<int>(::ERR_get_error()), net::error::get_ssl_category()};
  tls->set_verify_callback(ssl::host_name_verification(host));
  return step([&](auto handler) { tls->async_handshake(ssl::stream_base::client, handler); });
}

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
  tcp().expires_at(until);
  ec = step([&](auto handler) { tcp().async_connect(addresses, handler); });
  return ec ? ec : handshake(host);
}

EtcdHttp::error_code EtcdHttp::Connection::post(const std::string& path, const std::string& json,
                                                Clock::time_point until, const std::string& token) {
  http::request<http::string_body> req{http::verb::post, path, 11};
  req.set(http::field::host, host_);
  req.set(http::field::content_type, "application/json");
  req.set("Grpc-Metadata-Hasleader", "true");
  if (!token.empty()) req.set(http::field::authorization, token);
  req.keep_alive(false);  // one request per connection: an answer ends where the member closes it
  req.body() = json;
  req.prepare_payload();
  tcp().expires_at(until);
  return io([&](auto& stream, auto handler) { http::async_write(stream, req, handler); });
}

EtcdHttp::error_code EtcdHttp::Connection::read(http::response<http::string_body>& answer, std::uint64_t max_body,
                                                Clock::time_point until) {
  http::response_parser<http::string_body> parser;
  parser.body_limit(max_body);
  tcp().expires_at(until);
  auto ec = io([&](auto& stream, auto handler) { http::async_read_header(stream, buffer_, parser, handler); });
  if (ec) return ec;
  // Boost 1.74 parses a body that follows its header in the same read without checking its
  // Content-Length against the limit (async_read parses eagerly): checked here, header first.
  if (parser.content_length() && *parser.content_length() > max_body) return http::error::body_limit;
  ec = io([&](auto& stream, auto handler) { http::async_read(stream, buffer_, parser, handler); });
  if (!ec) answer = parser.release();
  return ec;
}

EtcdHttp::error_code EtcdHttp::Connection::read_header(Clock::time_point until) {
  streamed_.emplace();
  streamed_->body_limit(boost::none);  // the stream lasts as long as the watch
  tcp().expires_at(until);
  return io([&](auto& stream, auto handler) { http::async_read_header(stream, buffer_, *streamed_, handler); });
}

unsigned EtcdHttp::Connection::status() const { return streamed_ ? streamed_->get().result_int() : 0; }

EtcdHttp::error_code EtcdHttp::Connection::read_some(std::string& out, std::optional<Clock::time_point> until) {
  char chunk[8192];
  auto& body = streamed_->get().body();
  body.data = chunk;
  body.size = sizeof chunk;
  if (until)
    tcp().expires_at(*until);
  else
    tcp().expires_never();
  // read_some: back with whatever arrived (a message is far smaller than the buffer); a
  // whole-message read would wait for the buffer to fill.
  auto ec = io([&](auto& stream, auto handler) { http::async_read_some(stream, buffer_, *streamed_, handler); });
  if (ec == http::error::need_buffer) ec = {};
  out.append(chunk, sizeof chunk - body.size);
  return ec;
}

bool EtcdHttp::Connection::ended() const { return streamed_ && streamed_->is_done(); }

void EtcdHttp::Connection::close() {
  error_code ignored;
  tcp().socket().close(ignored);
}

}  // namespace meridian
