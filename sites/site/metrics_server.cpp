#include "sites/site/metrics_server.hpp"

// g++ 12 in C++20 mode needs <utility> ahead of the Asio/Beast headers (see BUILD-NOTES).
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <thread>

#include "core/runlog/prometheus.hpp"
#include "core/util/error.hpp"

namespace meridian {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;
using tcp = net::ip::tcp;

namespace {

constexpr auto kClientTimeout = std::chrono::seconds(5);

// One request and its answer; owns itself through the shared_ptr its handlers hold.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const std::function<std::string()>& render)
      : stream_(std::move(socket)), render_(render) {
    parser_.header_limit(8192);
    parser_.body_limit(0);  // a scrape has no body
  }

  void start() {
    stream_.expires_after(kClientTimeout);
    http::async_read(stream_, buffer_, parser_, [self = shared_from_this()](error_code ec, std::size_t) {
      self->answer(ec);
    });
  }

 private:
  void answer(error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::eof) return close();
    response_.version(11);
    response_.set(http::field::server, "meridian");
    response_.keep_alive(false);
    if (ec) {
      reply(http::status::bad_request, "malformed request: " + ec.message() + "\n", "text/plain");
    } else {
      const auto& request = parser_.get();
      const std::string target(request.target());
      if (target != "/metrics" && target.rfind("/metrics?", 0) != 0)
        reply(http::status::not_found, "not found: " + target + " (try /metrics)\n", "text/plain");
      else if (request.method() != http::verb::get && request.method() != http::verb::head)
        reply(http::status::method_not_allowed, "only GET /metrics\n", "text/plain");
      else
        try {
          reply(http::status::ok, render_(), std::string(PromText::kContentType), request.method() == http::verb::head);
        } catch (const std::exception& e) {  // a scrape must not take the site down with it
          reply(http::status::internal_server_error, std::string("cannot render metrics: ") + e.what() + "\n",
                "text/plain");
        }
    }
    stream_.expires_after(kClientTimeout);
    http::async_write(stream_, response_, [self = shared_from_this()](error_code, std::size_t) { self->close(); });
  }

  void reply(http::status status, std::string body, const std::string& type, bool head_only = false) {
    response_.result(status);
    response_.set(http::field::content_type, type);
    response_.content_length(body.size());
    if (!head_only) response_.body() = std::move(body);
  }

  void close() {
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  const std::function<std::string()>& render_;
  beast::flat_buffer buffer_;
  http::request_parser<http::empty_body> parser_;
  http::response<http::string_body> response_;
};

}  // namespace

struct MetricsServer::Impl {
  net::io_context io{1};
  tcp::acceptor acceptor{io};
  std::function<std::string()> render;
  std::thread thread;

  void accept() {
    acceptor.async_accept([this](error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted) return;
      if (!ec) std::make_shared<Session>(std::move(socket), render)->start();
      accept();
    });
  }
};

MetricsServer::MetricsServer(const std::string& address, int port, std::function<std::string()> render)
    : impl_(std::make_unique<Impl>()) {
  impl_->render = std::move(render);
  error_code ec;
  const auto ip = net::ip::make_address(address, ec);
  if (ec) throw make_error(ErrorKind::Config, "metrics address '", address, "' is not an IP address");
  const tcp::endpoint at(ip, static_cast<unsigned short>(port));
  impl_->acceptor.open(at.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(at, ec);
  if (!ec) impl_->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) throw make_error(ErrorKind::Io, "cannot serve metrics on ", address, ":", port, ": ", ec.message());
  port_ = impl_->acceptor.local_endpoint().port();
  impl_->accept();
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

MetricsServer::~MetricsServer() {
  impl_->io.stop();
  impl_->thread.join();
}

}  // namespace meridian
