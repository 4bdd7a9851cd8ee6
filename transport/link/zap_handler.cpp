#include "transport/link/zap_handler.hpp"

#include <zmq.h>

#include <array>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "core/util/error.hpp"
#include "transport/link/curve.hpp"
#include "transport/link/peer_gate.hpp"

namespace meridian {
namespace {

// A request: version, request id, domain, address, identity, mechanism, credentials (RFC 27).
constexpr std::size_t kRequestFrames = 7;
constexpr std::size_t kCurveKeyBytes = 32;

std::string z85(const zmq::message_t& key) {
  std::array<char, kCurveKeyChars + 1> text{};
  zmq_z85_encode(text.data(), static_cast<const std::uint8_t*>(key.data()), kCurveKeyBytes);
  return text.data();
}

}  // namespace

ZapHandler::ZapHandler(zmq::context_t& context, std::set<std::string> keys)
    : keys_(std::move(keys)),
      socket_(context, zmq::socket_type::rep),
      stop_rx_(context, zmq::socket_type::pair),
      stop_tx_(context, zmq::socket_type::pair) {
  for (auto* s : {&socket_, &stop_rx_, &stop_tx_}) s->set(zmq::sockopt::linger, 0);
  const std::string stop = "inproc://meridian-zap-stop-" + std::to_string(reinterpret_cast<std::uintptr_t>(this));
  try {
    socket_.bind("inproc://zeromq.zap.01");
    stop_rx_.bind(stop);
    stop_tx_.connect(stop);
  } catch (const zmq::error_t& e) {
    throw make_error(ErrorKind::Io, "cannot start the link's CURVE authenticator: ", e.what());
  }
  thread_ = std::thread([this] { run(); });  // socket_ and stop_rx_ are the thread's from here on
}

ZapHandler::~ZapHandler() {
  stop_tx_.send(zmq::buffer(std::string_view("stop")), zmq::send_flags::none);
  thread_.join();
}

std::map<std::string, std::uint64_t> ZapHandler::take_refusals() {
  std::lock_guard lock(mutex_);
  return std::exchange(refused_, {});
}

void ZapHandler::run() {
  for (;;) {
    zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}, {stop_rx_.handle(), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(-1));
      if (items[1].revents & ZMQ_POLLIN) return;
      if (items[0].revents & ZMQ_POLLIN) answer();
    } catch (const zmq::error_t&) {
      // EINTR; or a reply that could not go, whose handshake then fails: the next request is apart.
    }
  }
}

void ZapHandler::answer() {
  std::vector<zmq::message_t> request;
  for (bool more = true; more;) {
    zmq::message_t part;
    if (!socket_.recv(part, zmq::recv_flags::dontwait)) return;  // parts come together or not at all
    more = part.more();
    if (request.size() < kRequestFrames + 1) request.push_back(std::move(part));
  }
  // libzmq is the only writer here (inproc, this context): a request of another shape is a bug
  // there, answered "500" all the same so the handshake it holds ends.
  const bool shaped = request.size() == kRequestFrames && request[0].to_string_view() == "1.0" &&
                      request[5].to_string_view() == "CURVE" && request[6].size() == kCurveKeyBytes;
  std::string status = "500", text = "not a CURVE handshake", user;
  if (shaped) {
    const std::string key = z85(request[6]);
    if (keys_.contains(key)) {
      status = "200", text = "OK", user = key;
    } else {
      status = "400", text = "this key is not one of the job's";
      const std::string name = "key " + key.substr(0, 8) + " from " + printable_name(request[3].to_string());
      std::lock_guard lock(mutex_);
      note_refusal(refused_, name);
    }
  }
  const std::string request_id = request.size() > 1 ? request[1].to_string() : "";
  constexpr auto more = zmq::send_flags::sndmore;
  socket_.send(zmq::buffer(std::string_view("1.0")), more);
  socket_.send(zmq::buffer(request_id), more);
  socket_.send(zmq::buffer(status), more);
  socket_.send(zmq::buffer(text), more);
  socket_.send(zmq::buffer(user), more);
  socket_.send(zmq::buffer(std::string_view()), zmq::send_flags::none);
}

}  // namespace meridian
