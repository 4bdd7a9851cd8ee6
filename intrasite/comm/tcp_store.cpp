#include "intrasite/comm/tcp_store.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>
#include <zmq.hpp>

#include "core/util/constant_time.hpp"
#include "core/util/digest.hpp"
#include "core/util/error.hpp"
#include "transport/schemas/store.capnp.h"
#include "transport/schemas/wire_bytes.hpp"

namespace meridian {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using wire::StoreRequest;
using wire::StoreResponse;
using Failure = StoreResponse::Failure;

// Larger frames are cut off by ZeroMQ itself (the sender is disconnected) before they are buffered;
// frames between the store limits and this one still get an error reply that says what is wrong.
constexpr std::int64_t kMaxFrameBytes = 4 * static_cast<std::int64_t>(kMaxStoreValueBytes);
// A hostile client could otherwise park gets until the server runs out of memory.
constexpr std::size_t kMaxParkedGets = 4096;

// The traversal limit bounds the work a message that points at the same bytes repeatedly can cause;
// the schema nests two levels deep.
constexpr capnp::ReaderOptions kReaderOptions{kMaxFrameBytes / sizeof(capnp::word), 8};

// Cap'n Proto reads words in place, and a ZeroMQ frame's bytes carry no alignment guarantee.
kj::Array<capnp::word> aligned_words(const zmq::message_t& frame) {
  return meridian::aligned_words({static_cast<const std::byte*>(frame.data()), frame.size()}, "a frame");
}

zmq::message_t encode(capnp::MessageBuilder& message) {
  const kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  return zmq::message_t(words.asBytes().begin(), words.asBytes().size());
}

std::span<const std::byte> as_bytes(capnp::Data::Reader d) {
  return {reinterpret_cast<const std::byte*>(d.begin()), d.size()};
}
capnp::Data::Reader as_data(std::span<const std::byte> b) {
  return {reinterpret_cast<const kj::byte*>(b.data()), b.size()};
}

// Whether any item is readable; false on timeout and when a signal cut the wait short (callers
// re-check their clocks and poll again).
template <std::size_t N>
bool poll_ready(zmq::pollitem_t (&items)[N], milliseconds timeout) {
  try {
    return zmq::poll(items, N, timeout) > 0;
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) throw;
    return false;
  }
}

// Receives the remaining parts of a multipart message; returns the first of them and their count.
std::pair<zmq::message_t, std::size_t> receive_rest(zmq::socket_t& socket, bool more) {
  zmq::message_t first;
  std::size_t count = 0;
  for (zmq::message_t part; more && socket.recv(part, zmq::recv_flags::dontwait); ++count) {
    more = part.more();
    if (count == 0) first = std::move(part);
  }
  return {std::move(first), count};
}

}  // namespace

CurveKeypair store_server_curve_keys(const std::string& secret) {
  if (!zmq_has("curve"))
    throw make_error(ErrorKind::Config,
                     "this libzmq was built without CURVE (libsodium), which the site's store needs");
  // A key of its own for this use, so the secret's other uses never meet the same bytes.
  constexpr std::string_view kPurpose = "meridian site store CurveZMQ server key";
  const Digest key = hmac_sha256(std::as_bytes(std::span(secret.data(), secret.size())),
                                 std::as_bytes(std::span(kPurpose.data(), kPurpose.size())));
  char secret_key[kCurveKeyChars + 1];
  MERIDIAN_CHECK(zmq_z85_encode(secret_key, reinterpret_cast<const std::uint8_t*>(key.data()), key.size()) != nullptr,
                 "Z85 of a 32-byte key");
  return curve_keypair_of(secret_key);
}

// The server side's state; runs on the server's thread only (or a test's).
struct StoreRequests::Impl {
  struct Parked { std::string key, peer; std::uint64_t id; std::uint32_t timeout_ms; };

  Impl(std::string secret, Reply reply) : secret_(std::move(secret)), reply_(std::move(reply)) {}

  void receive(const std::string& peer, std::span<const std::byte> frame, std::size_t parts) {
    if (parts != 1) return fail(peer, 0, Failure::Kind::INVALID, detail::concat("a request is 1 frame, not ", parts));
    std::uint64_t id = 0;
    try {
      const kj::Array<capnp::word> words = meridian::aligned_words(frame, "a frame");
      capnp::FlatArrayMessageReader reader(words, kReaderOptions);
      const StoreRequest::Reader request = reader.getRoot<StoreRequest>();
      id = request.getId();
      if (request.getVersion() != wire::STORE_SCHEMA_VERSION)
        throw make_error(ErrorKind::Peer, "store schema version ", request.getVersion(),
                         " is not supported; this server speaks version ", wire::STORE_SCHEMA_VERSION);
      const auto secret = request.getSecret();
      if (!equal_in_constant_time(secret_, {reinterpret_cast<const char*>(secret.begin()), secret.size()}))
        return fail(peer, id, Failure::Kind::UNAUTHENTICATED, "not the site's store secret");
      const auto key = request.getKey();
      if (key.size() > kMaxStoreKeyBytes)
        throw make_error(ErrorKind::Peer, "a key of ", key.size(), " bytes exceeds the limit of ", kMaxStoreKeyBytes);
      serve(peer, id, std::string(key.cStr(), key.size()), request);
    } catch (const Error& e) {
      fail(peer, id, Failure::Kind::INVALID, e.what());
    } catch (const kj::Exception& e) {
      fail(peer, id, Failure::Kind::INVALID, std::string("malformed request: ") + e.getDescription().cStr());
    }
  }

  void serve(const std::string& peer, std::uint64_t id, std::string key, StoreRequest::Reader request) {
    switch (request.which()) {
      case StoreRequest::SET: {
        const auto value = as_bytes(request.getSet());
        if (value.size() > kMaxStoreValueBytes)
          throw make_error(ErrorKind::Peer, "a value of ", value.size(), " bytes for key \"", key,
                           "\" exceeds the limit of ", kMaxStoreValueBytes);
        values_[key].assign(value.begin(), value.end());
        respond(peer, id, [](StoreResponse::Builder r) { r.setOk(); });
        return wake(key);
      }
      case StoreRequest::GET: {
        const std::uint32_t timeout_ms = request.getGet();
        if (const auto it = values_.find(key); it != values_.end()) return send_value(peer, id, it->second);
        if (parked_.size() >= kMaxParkedGets)
          return fail(peer, id, Failure::Kind::BUSY, std::to_string(parked_.size()) + " gets are already waiting");
        // Parked even with no time to wait: expire() answers it in this same turn of the loop.
        parked_.emplace(Clock::now() + milliseconds(timeout_ms), Parked{std::move(key), peer, id, timeout_ms});
        return;
      }
      case StoreRequest::CHECK: {
        const bool present = values_.count(key) > 0;
        return respond(peer, id, [&](StoreResponse::Builder r) { r.setPresent(present); });
      }
      case StoreRequest::ADD: {
        std::int64_t value = 0;
        if (const auto it = values_.find(key); it != values_.end()) {
          // Refused rather than reset (as MemoryStore would): a non-counter here is someone's real data.
          if (it->second.size() != sizeof value)
            throw make_error(ErrorKind::Peer, "add: the value at \"", key, "\" is ", it->second.size(),
                             " bytes, not an 8-byte counter");
          std::memcpy(&value, it->second.data(), sizeof value);
        }
        if (__builtin_add_overflow(value, request.getAdd(), &value))
          throw make_error(ErrorKind::Peer, "add: counter \"", key, "\" would overflow");
        std::vector<std::byte>& bytes = values_[key];
        bytes.resize(sizeof value);
        std::memcpy(bytes.data(), &value, sizeof value);
        respond(peer, id, [&](StoreResponse::Builder r) { r.setCounter(value); });
        return wake(key);
      }
    }
    throw make_error(ErrorKind::Peer, "unknown request kind ", static_cast<int>(request.which()));
  }

  // Answers every get parked on a key that now exists. A scan: the gets parked at once are about
  // one per replica of the site, and never more than kMaxParkedGets.
  void wake(const std::string& key) {
    std::erase_if(parked_, [&](const auto& entry) {
      const Parked& get = entry.second;
      if (get.key == key) send_value(get.peer, get.id, values_.at(key));
      return get.key == key;
    });
  }

  void expire(Clock::time_point now) {
    for (auto it = parked_.begin(); it != parked_.end() && it->first <= now; it = parked_.erase(it))
      fail(it->second.peer, it->second.id, Failure::Kind::TIMEOUT,
           detail::concat("store key \"", it->second.key, "\" did not appear within ", it->second.timeout_ms, " ms"));
  }

  void send_value(const std::string& peer, std::uint64_t id, std::span<const std::byte> value) {
    respond(peer, id, [&](StoreResponse::Builder r) { r.setValue(as_data(value)); });
  }

  void fail(const std::string& peer, std::uint64_t id, Failure::Kind kind, const std::string& message) {
    respond(peer, id, [&](StoreResponse::Builder r) {
      auto failure = r.initError();
      failure.setKind(kind);
      failure.setMessage(message);
    });
  }

  template <class Fill>
  void respond(const std::string& peer, std::uint64_t id, Fill fill) {
    capnp::MallocMessageBuilder message;
    auto response = message.initRoot<StoreResponse>();
    response.setVersion(wire::STORE_SCHEMA_VERSION);
    response.setId(id);
    fill(response);
    const kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
    const auto bytes = words.asBytes();
    reply_(peer, {reinterpret_cast<const std::byte*>(bytes.begin()), bytes.size()});
  }

  std::string secret_;
  Reply reply_;
  std::map<std::string, std::vector<std::byte>> values_;
  std::multimap<Clock::time_point, Parked> parked_;  // gets waiting for their key, by deadline
};

StoreRequests::StoreRequests(std::string secret, Reply reply)
    : impl_(std::make_unique<Impl>(std::move(secret), std::move(reply))) {}
StoreRequests::~StoreRequests() = default;
void StoreRequests::receive(const std::string& peer, std::span<const std::byte> frame, std::size_t parts) {
  impl_->receive(peer, frame, parts);
}
void StoreRequests::expire(Clock::time_point now) { impl_->expire(now); }
std::optional<Clock::time_point> StoreRequests::next_due() const {
  if (impl_->parked_.empty()) return std::nullopt;
  return impl_->parked_.begin()->first;
}

namespace {

// The server's thread: the ROUTER socket's requests to `requests`, their answers back, until the
// context shuts down (the server's destructor).
void serve_store(zmq::socket_t socket, std::string secret) {
  StoreRequests requests(std::move(secret), [&socket](const std::string& peer, std::span<const std::byte> frame) {
    // Never block the server: a peer that is gone or not reading loses its reply (ROUTER drops it).
    if (socket.send(zmq::buffer(peer), zmq::send_flags::sndmore | zmq::send_flags::dontwait))
      (void)socket.send(zmq::message_t(frame.data(), frame.size()), zmq::send_flags::dontwait);
  });
  for (;;) {
    try {
      const auto due = requests.next_due();
      const auto timeout = !due ? milliseconds(-1)
          : std::max(std::chrono::ceil<milliseconds>(*due - Clock::now()), milliseconds(0));
      zmq::pollitem_t items[] = {{socket.handle(), 0, ZMQ_POLLIN, 0}};
      if (poll_ready(items, timeout)) {
        zmq::message_t peer_frame;
        if (socket.recv(peer_frame, zmq::recv_flags::dontwait)) {
          const auto [frame, parts] = receive_rest(socket, peer_frame.more());
          requests.receive(peer_frame.to_string(), {static_cast<const std::byte*>(frame.data()), frame.size()}, parts);
        }
      }
      requests.expire(Clock::now());
    } catch (const zmq::error_t& e) {
      // Nothing but ETERM is expected from a bound ROUTER; otherwise say why answers stop.
      if (e.num() != ETERM) std::fprintf(stderr, "meridian: store server stopped: %s\n", e.what());
      return;
    }
  }
}

}  // namespace

struct TcpStoreServer::Impl { zmq::context_t context{1}; std::thread thread; };

TcpStoreServer::TcpStoreServer(const std::string& address, int port, std::string secret)
    : impl_(std::make_unique<Impl>()) {
  MERIDIAN_CHECK(!secret.empty(), "a store server without a secret");
  zmq::socket_t socket(impl_->context, zmq::socket_type::router);
  socket.set(zmq::sockopt::curve_server, 1);
  socket.set(zmq::sockopt::curve_secretkey, store_server_curve_keys(secret).secret_key);
  socket.set(zmq::sockopt::linger, 0);
  socket.set(zmq::sockopt::maxmsgsize, kMaxFrameBytes);
  const std::string wanted = "tcp://" + address + ":" + (port == 0 ? std::string("*") : std::to_string(port));
  try {
    socket.bind(wanted);
  } catch (const zmq::error_t& e) {
    throw make_error(ErrorKind::Io, "store server cannot listen on ", wanted, ": ", e.what());
  }
  endpoint_ = socket.get(zmq::sockopt::last_endpoint);  // names the port the system picked for "*"
  port_ = std::stoi(endpoint_.substr(endpoint_.rfind(':') + 1));
  impl_->thread = std::thread([socket = std::move(socket), secret = std::move(secret)]() mutable {
    serve_store(std::move(socket), std::move(secret));
  });
}

TcpStoreServer::~TcpStoreServer() {
  impl_->context.shutdown();  // the service's poll returns ETERM; it closes its socket and returns
  impl_->thread.join();
}

struct TcpStoreClient::Impl {
  std::string endpoint, secret, server_key;
  milliseconds io_timeout;
  zmq::context_t context{1};
  zmq::socket_t socket;
  // The socket's disconnect and failed-handshake events: a reply can never arrive over a dropped
  // connection (the server would answer the old routing id), nor over one whose handshake failed,
  // so a waiting call fails at once instead of at its deadline.
  zmq::socket_t monitor;
  int sockets_made = 0;  // monitor endpoints are named per socket
  std::uint64_t next_id = 1;
  bool secret_refused = false;  // the last call's refusal said the secret was not the server's

  Impl(const std::string& endpoint, std::string secret, milliseconds io_timeout)
      : endpoint(endpoint),
        secret(std::move(secret)),
        server_key(store_server_curve_keys(this->secret).public_key),
        io_timeout(io_timeout) {
    reconnect();
  }

  // A DEALER rather than a REQ: after a timeout a REQ socket is stuck waiting for the lost reply
  // (unless relaxed and correlated), whereas a DEALER plus the request id the schema carries
  // anyway lets a late reply simply be recognised and dropped.
  void reconnect() try {
    monitor.close();
    socket = zmq::socket_t(context, zmq::socket_type::dealer);
    // Dropping queued requests on close is the point: a request the caller already gave up on
    // must not reach a server that comes back later.
    socket.set(zmq::sockopt::linger, 0);
    socket.set(zmq::sockopt::maxmsgsize, kMaxFrameBytes);
    socket.set(zmq::sockopt::sndtimeo, static_cast<int>(io_timeout.count()));
    // A fresh key pair per socket: the server knows clients by the secret their requests carry.
    const CurveKeypair own = make_curve_keypair();
    socket.set(zmq::sockopt::curve_serverkey, server_key);
    socket.set(zmq::sockopt::curve_publickey, own.public_key);
    socket.set(zmq::sockopt::curve_secretkey, own.secret_key);
    const std::string events = "inproc://store-client-events-" + std::to_string(sockets_made++);
    if (zmq_socket_monitor(socket.handle(), events.c_str(), ZMQ_EVENT_DISCONNECTED | kHandshakeFailed) != 0)
      throw zmq::error_t();
    monitor = zmq::socket_t(context, zmq::socket_type::pair);
    monitor.set(zmq::sockopt::linger, 0);
    monitor.connect(events);
    socket.connect(endpoint);
  } catch (const zmq::error_t& e) {
    throw make_error(e.num() == EINVAL ? ErrorKind::Config : ErrorKind::Io, "cannot connect to store endpoint \"",
                     endpoint, "\": ", e.what());
  }

  static constexpr int kHandshakeFailed =
      ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
  enum class Drop { none, connection, handshake };

  // Consumes pending monitor events; the gravest of them. A server under another secret cannot
  // open this client's hello (its key is not the one the client's secret gives), so the
  // handshake fails: the client's secret is refused, as a request carrying it would be.
  Drop drops() {
    Drop gravest = Drop::none;
    for (zmq::message_t event; monitor.recv(event, zmq::recv_flags::dontwait);) {
      std::uint16_t kind = 0;  // an event is two frames: its kind and value, then the peer's address
      if (event.size() >= sizeof kind) std::memcpy(&kind, event.data(), sizeof kind);
      receive_rest(monitor, event.more());
      gravest = std::max(gravest, (kind & kHandshakeFailed) != 0 ? Drop::handshake : Drop::connection);
    }
    return gravest;
  }

  // Sends op(key) with the payload `fill` writes and waits up to `wait` for the reply carrying its
  // id; returns what `extract` reads from it, once its kind is `expected`.
  template <class Fill, class Extract>
  auto call(const char* op, const std::string& key, StoreResponse::Which expected, milliseconds wait, Fill fill,
            Extract extract) {
    if (key.size() > kMaxStoreKeyBytes)
      throw make_error(ErrorKind::Data, "store key of ", key.size(), " bytes exceeds the limit of ", kMaxStoreKeyBytes);
    const std::string what = std::string(op) + "(\"" + key + "\")";
    const std::uint64_t id = next_id++;
    secret_refused = false;
    capnp::MallocMessageBuilder message;
    auto request = message.initRoot<StoreRequest>();
    request.setVersion(wire::STORE_SCHEMA_VERSION);
    request.setId(id);
    request.setKey(capnp::Text::Reader(key.data(), key.size()));
    request.setSecret(as_data(std::as_bytes(std::span(secret.data(), secret.size()))));
    fill(request);
    const auto deadline = Clock::now() + wait;
    const auto broken = [&](ErrorKind kind, const std::string& why) {
      reconnect();
      return make_error(kind, "store server at ", endpoint, " ", why, " (", what, ")");
    };
    drops();  // a drop before this call says nothing about it: the DEALER reconnects
    if (!socket.send(encode(message), zmq::send_flags::none)) throw broken(ErrorKind::Timeout, "took no request in time");
    for (;;) {
      const auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now());
      if (left <= milliseconds(0))
        throw broken(ErrorKind::Timeout, "did not answer within " + std::to_string(wait.count()) + " ms");
      zmq::pollitem_t items[] = {{socket.handle(), 0, ZMQ_POLLIN, 0}, {monitor.handle(), 0, ZMQ_POLLIN, 0}};
      if (!poll_ready(items, left)) continue;
      zmq::message_t frame;
      if (!socket.recv(frame, zmq::recv_flags::dontwait)) {
        const Drop drop = drops();
        secret_refused = drop == Drop::handshake;
        if (secret_refused)
          throw broken(ErrorKind::Peer, "refused the handshake: not the site's store secret, or not the site's store");
        if (drop == Drop::connection) throw broken(ErrorKind::Peer, "dropped the connection");
        continue;
      }
      std::optional<Error> refusal;
      std::string defect;
      try {
        if (const std::size_t extra = receive_rest(socket, frame.more()).second; extra != 0)
          throw make_error(ErrorKind::Peer, "a reply of ", extra + 1, " frames");
        const kj::Array<capnp::word> words = aligned_words(frame);
        capnp::FlatArrayMessageReader reader(words, kReaderOptions);
        const StoreResponse::Reader response = reader.getRoot<StoreResponse>();
        if (response.getVersion() != wire::STORE_SCHEMA_VERSION)
          throw make_error(ErrorKind::Peer, "store schema version ", response.getVersion(), " is not this client's ",
                           wire::STORE_SCHEMA_VERSION);
        if (response.getId() != id) continue;  // a late answer to a call abandoned after its timeout
        if (response.which() == expected) return extract(response);
        if (!response.isError()) throw make_error(ErrorKind::Peer, "reply kind ", static_cast<int>(response.which()));
        const std::string message = response.getError().getMessage().cStr();
        secret_refused = response.getError().getKind() == Failure::Kind::UNAUTHENTICATED;
        refusal = response.getError().getKind() == Failure::Kind::TIMEOUT
                      ? Error(ErrorKind::Timeout, message)
                      : make_error(ErrorKind::Peer, "store server at ", endpoint, " refused ", what, ": ", message);
      } catch (const kj::Exception& e) {
        defect = e.getDescription().cStr();
      } catch (const Error& e) {
        defect = e.what();
      }
      if (refusal) throw *refusal;
      throw broken(ErrorKind::Peer, "sent a malformed reply: " + defect);
    }
  }
};

TcpStoreClient::TcpStoreClient(const std::string& endpoint, std::string secret, milliseconds io_timeout)
    : impl_(std::make_unique<Impl>(endpoint, std::move(secret), io_timeout)) {}

TcpStoreClient::~TcpStoreClient() = default;

void TcpStoreClient::set(const std::string& key, std::span<const std::byte> value) {
  if (value.size() > kMaxStoreValueBytes)
    throw make_error(ErrorKind::Data, "store value of ", value.size(), " bytes for key \"", key,
                     "\" exceeds the limit of ", kMaxStoreValueBytes);
  impl_->call(
      "set", key, StoreResponse::OK, impl_->io_timeout, [&](StoreRequest::Builder r) { r.setSet(as_data(value)); },
      [](StoreResponse::Reader) {});
}

std::vector<std::byte> TcpStoreClient::get(const std::string& key, milliseconds timeout) {
  // The server parks the get for the caller's timeout; the io timeout bounds everything else.
  const auto parked = std::clamp<milliseconds::rep>(timeout.count(), 0, std::numeric_limits<std::uint32_t>::max());
  return impl_->call(
      "get", key, StoreResponse::VALUE, milliseconds(parked) + impl_->io_timeout,
      [&](StoreRequest::Builder r) { r.setGet(static_cast<std::uint32_t>(parked)); },
      [](StoreResponse::Reader r) {
        const auto value = as_bytes(r.getValue());
        return std::vector<std::byte>(value.begin(), value.end());
      });
}

bool TcpStoreClient::check(const std::string& key) {
  return impl_->call(
      "check", key, StoreResponse::PRESENT, impl_->io_timeout, [](StoreRequest::Builder r) { r.setCheck(); },
      [](StoreResponse::Reader r) { return r.getPresent(); });
}

bool TcpStoreClient::secret_accepted() {
  try {
    check("secret");
    return true;
  } catch (const Error&) {
    if (impl_->secret_refused) return false;
    throw;
  }
}

std::int64_t TcpStoreClient::add(const std::string& key, std::int64_t delta) {
  return impl_->call(
      "add", key, StoreResponse::COUNTER, impl_->io_timeout, [&](StoreRequest::Builder r) { r.setAdd(delta); },
      [](StoreResponse::Reader r) { return r.getCounter(); });
}

}  // namespace meridian
