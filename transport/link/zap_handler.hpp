#pragma once
// Who may connect to a CURVE link. For every connection a peer opens, ZeroMQ asks the handler
// bound at inproc://zeromq.zap.01 on the socket's context (ZAP, RFC 27) whether the key the peer
// proved may in. This one admits the job's keys and answers any other with 400; it names the
// admitted key as the connection's User-Id, which the link reads off each message to hold the
// sender to the address it claims. Refused keys are kept for the site's events, by key and the
// address they came from, a bounded number of them.
//
// It answers on a thread of its own: a peer's handshake must not wait for the site's training
// step to end, as the link's own work does.
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include <zmq.hpp>

namespace meridian {

class ZapHandler {
 public:
  // Binds on `context` (before any CURVE socket there accepts a connection); `keys` in Z85.
  ZapHandler(zmq::context_t& context, std::set<std::string> keys);
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  // The refused handshakes since the last call, "key <first 8 characters> from <address>", with
  // their counts (at most PeerGate::kMaxNamed names, the rest counted together).
  std::map<std::string, std::uint64_t> take_refusals();

 private:
  void run();
  void answer();  // one request waiting on socket_

  const std::set<std::string> keys_;
  zmq::socket_t socket_;
  zmq::socket_t stop_rx_, stop_tx_;  // the destructor's word to the thread, without a poll timeout
  std::mutex mutex_;
  std::map<std::string, std::uint64_t> refused_;
  std::thread thread_;
};

}  // namespace meridian
