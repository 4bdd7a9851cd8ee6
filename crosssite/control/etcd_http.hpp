#pragma once
// The one HTTP/1.1 path to etcd's JSON gateway, shared by EtcdClient's requests and EtcdWatch's
// stream: connect to a member, POST a JSON body with the headers every etcd request carries, and
// read the answer whole or as it comes. Each step runs this object's io_context on the calling
// thread until the step completes or its deadline passes (beast::error::timeout); handlers of
// other work on the context (the watch's probe timer) run meanwhile. The context never runs out
// of work, so nothing but stop() ends a step early, and after stop() nothing runs on it again.
//
// With TLS (an https:// endpoint) every connection is mutual TLS: the member's certificate must
// chain to the job's CA and name the host dialled (an IP address or a DNS name in its
// subjectAltName), and this side shows its own certificate, as etcd's --client-cert-auth asks.
// g++ 12 in C++20 mode needs <utility> ahead of the Asio/Beast headers (see BUILD-NOTES).
#include <utility>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/core.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "crosssite/control/etcd_tls.hpp"

namespace meridian {

class EtcdHttp {
 public:
  using Clock = std::chrono::steady_clock;
  using error_code = boost::system::error_code;

  // Error(Config) naming the file when a TLS file cannot be loaded.
  explicit EtcdHttp(const std::optional<EtcdTls>& tls = std::nullopt);
  // From any thread: the step in progress, and every later one, end with operation_aborted.
  void stop();
  boost::asio::io_context& context() { return ioc_; }

  // One connection to one member, for one request.
  class Connection {
   public:
    explicit Connection(EtcdHttp& http);
    // Resolves host and connects, then with TLS shakes hands (a certificate etcd refuses, or one
    // of etcd's this side cannot verify, fails here); a name that does not resolve is `resolve_failed`.
    error_code connect(const std::string& host, const std::string& port, Clock::time_point until);
    bool resolve_failed() const { return resolve_failed_; }
    // POSTs `json` to `path`. A member without a leader rejects it at once (gRPC metadata
    // hasleader=true, etcd's WithRequireLeader) instead of holding it for its own 5+ s timeout,
    // and a watch of one that loses its leader is cancelled instead of going silent.
    // `token`: etcd's auth token, sent as its gateway takes it (the Authorization header); none
    // when empty.
    error_code post(const std::string& path, const std::string& json, Clock::time_point until,
                    const std::string& token = {});
    // The whole answer, with a body of at most max_body bytes.
    error_code read(boost::beast::http::response<boost::beast::http::string_body>& answer, std::uint64_t max_body,
                    Clock::time_point until);
    // A streamed answer: its header first (status()), then whatever of its body arrived next,
    // appended to `out`, until ended(); no deadline (a watch is quiet while nothing changes) but
    // `until` where given.
    error_code read_header(Clock::time_point until);
    unsigned status() const;
    error_code read_some(std::string& out, std::optional<Clock::time_point> until);
    bool ended() const;
    // From a handler on the context (the watch's probe): the read in progress ends with an error.
    void close();

   private:
    template <class Start>
    error_code step(Start&& start);
    // One step of `op(stream, handler)` on the plain or the TLS stream, whichever this connection is.
    template <class Op>
    error_code io(Op&& op);
    boost::beast::tcp_stream& tcp();
    error_code handshake(const std::string& host);

    EtcdHttp& http_;
    std::variant<boost::beast::tcp_stream, boost::beast::ssl_stream<boost::beast::tcp_stream>> stream_;
    std::string host_;  // host:port, for the Host header
    bool resolve_failed_ = false;
    boost::beast::flat_buffer buffer_;
    std::optional<boost::beast::http::response_parser<boost::beast::http::buffer_body>> streamed_;
  };

 private:
  boost::asio::io_context ioc_;
  std::optional<boost::asio::ssl::context> tls_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
};

}  // namespace meridian
