#include "transport/link/zmq_link.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <utility>

#include <zmq.hpp>

#include "core/util/error.hpp"
#include "transport/chunking/assembler.hpp"
#include "transport/link/faults.hpp"
#include "transport/link/incoming.hpp"
#include "transport/link/kept_bytes.hpp"
#include "transport/link/peer_gate.hpp"
#include "transport/link/zap_handler.hpp"

// Wire format. The ROUTER prefixes every message with the sending DEALER's routing id, which is
// the sender's address; after it comes one kind byte and the body:
//   'D' [encoded ChunkHeader] [payload]            a chunk frame
//   'R' [transfer id u64 LE, chunk index u32 LE]   "send me this chunk of your transfer again"
// Chunk headers are self-describing and checksummed, so no envelope of ours is needed beyond that.
// Answers to a re-request go back on this link's DEALER to the requester, like any chunk.
// The routing id is only what the sender claims: re-requests and their answers go to it only over a
// connection this link already has or to a listed peer (peer_gate.hpp), never to a new address.
// With CURVE (LinkCurve) the routing id is the sender's address with its key, and every message's
// User-Id is the key its connection proved (ZAP): the two must agree, so a site holding one of the
// job's keys cannot speak for another.
// Payload parts are handed to ZeroMQ without a copy: each holds on to the payload the link keeps
// (kept_bytes.hpp) until the I/O thread is done with it, and counts in its peer's queue until then.

namespace meridian {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// ZeroMQ cuts off a peer that sends more than this in one part, before buffering it.
constexpr std::int64_t kMaxPartBytes = static_cast<std::int64_t>(kMaxChunkBytes) + 4096;
// What a frame costs its peer's queue beyond its payload: its kind and header parts, ZeroMQ's own.
constexpr std::size_t kFrameCost = 256;
// Lets frames already handed over leave the host when the link is destroyed right after a send.
constexpr int kLingerMs = 1000;
using KeptPayload = std::shared_ptr<const void>;
// Bytes waiting to leave for one peer: added as frames are handed to ZeroMQ, taken off by its I/O
// thread as it is done with each.
using QueuedBytes = std::shared_ptr<std::atomic<std::size_t>>;

// What a payload part holds until ZeroMQ frees it.
struct PartHold {
  KeptPayload owner;
  QueuedBytes queued;
  std::size_t cost;
  static void release(void*, void* hint) {
    auto* hold = static_cast<PartHold*>(hint);
    *hold->queued -= hold->cost;
    delete hold;
  }
};

std::size_t chunks_of(std::size_t bytes, std::size_t chunk_bytes) { return std::max<std::size_t>(1, (bytes + chunk_bytes - 1) / chunk_bytes); }

std::span<const std::byte> bytes_of(const zmq::message_t& m) {
  return {static_cast<const std::byte*>(m.data()), m.size()};
}

class ZmqLink final : public Link {
 public:
  ZmqLink(const std::string& bind_address, std::size_t chunk_bytes, const LinkFaults& faults, std::uint16_t port,
          std::size_t queue_bytes, std::optional<LinkCurve> curve)
      : queue_bytes_(queue_bytes),
        faults_(faults),
        sent_(chunk_bytes),
        curve_(std::move(curve)),
        zap_(curve_ ? std::make_unique<ZapHandler>(context_, curve_->job_keys) : nullptr),
        router_(context_, zmq::socket_type::router) {
    MERIDIAN_CHECK(chunk_bytes > 0 && chunk_bytes <= kMaxChunkBytes, "chunk_bytes=", chunk_bytes);
    router_.set(zmq::sockopt::linger, 0);
    router_.set(zmq::sockopt::maxmsgsize, kMaxPartBytes);
    if (curve_) {
      router_.set(zmq::sockopt::curve_server, true);
      router_.set(zmq::sockopt::curve_secretkey, curve_->own.secret_key);
      router_.set(zmq::sockopt::zap_domain, "meridian");
    }
    try {
      router_.bind("tcp://" + bind_address + ":" + (port == 0 ? std::string("*") : std::to_string(port)));
    } catch (const zmq::error_t& e) {
      throw make_error(ErrorKind::Io, "cannot bind a link to ", bind_address, ": ", e.what());
    }
    address_ = router_.get(zmq::sockopt::last_endpoint);
    if (curve_) address_ = curve_address(address_, curve_->own.public_key);
  }

  std::string address() const override { return address_; }
  Counters counters() const override { return counters_; }
  void recycle(std::vector<std::byte> bytes) override { incoming_.recycle(std::move(bytes)); }
  std::map<std::string, std::uint64_t> take_refusals() override {
    auto refused = gate_.take_refusals();
    if (zap_)
      for (auto& [name, count] : zap_->take_refusals()) refused[name] += count;
    return refused;
  }

  // Connections to peers no longer listed are closed: the link's sockets stay as many as its peers.
  void set_peers(std::set<std::string> peers, std::function<bool(const std::string&)> vouch) override {
    std::erase_if(dealers_, [&](const auto& entry) { return !peers.contains(entry.first); });
    gate_.set(std::move(peers), std::move(vouch));
  }

  void send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
            std::span<const std::byte> payload) override {
    Dealer& dealer = dealer_for(peer);
    if (full(dealer, payload.size())) return;
    const auto& sent = sent_.keep(peer, transfer_id, tag, payload);
    send_frames(dealer, sent.frames, sent.owner);
  }

  void send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
            std::shared_ptr<const std::vector<std::byte>> payload) override {
    MERIDIAN_CHECK(payload != nullptr, "no payload");
    Dealer& dealer = dealer_for(peer);
    if (full(dealer, payload->size())) return;
    const auto& sent = sent_.keep(peer, transfer_id, tag, std::move(payload));
    send_frames(dealer, sent.frames, sent.owner);
  }

  void send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
            std::shared_ptr<const std::vector<std::byte>> payload, ChunkHashes hashes) override {
    MERIDIAN_CHECK(payload != nullptr, "no payload");
    Dealer& dealer = dealer_for(peer);
    if (full(dealer, payload->size())) return;
    const auto& sent = sent_.keep(peer, transfer_id, tag, std::move(payload), hashes);
    send_frames(dealer, sent.frames, sent.owner);
  }

  std::size_t chunk_bytes() const override { return sent_.chunk_bytes(); }

  std::optional<Received> receive(milliseconds timeout) override {
    const auto deadline = Clock::now() + timeout;
    std::optional<Received> delivered;
    for (;;) {
      // Drains what is already queued before looking at the clock, so that a zero timeout still
      // makes progress.
      while (handle_next(delivered))
        if (delivered) return delivered;
      const auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now());
      if (left <= milliseconds(0)) return std::nullopt;
      zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0}};
      try {
        zmq::poll(items, 1, left);
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) throw make_error(ErrorKind::Io, "link poll failed: ", e.what());
      }
    }
  }

 private:
  struct Dealer {
    zmq::socket_t socket;
    QueuedBytes queued = std::make_shared<std::atomic<std::size_t>>(0);
  };

  // The connection to a peer the caller sends to, made on first use. Error(Peer) when ZeroMQ
  // refuses the address or has no socket left.
  Dealer& dealer_for(const std::string& peer) {
    if (const auto it = dealers_.find(peer); it != dealers_.end()) return it->second;
    const CurveAddress target = split_curve_address(peer);
    if (curve_ && !(target.public_key && is_curve_key(*target.public_key)))
      throw make_error(ErrorKind::Peer, "cannot connect a link to \"", printable_name(peer),
                       "\": its address names no CURVE key, and this link speaks only CURVE");
    try {
      zmq::socket_t socket(context_, zmq::socket_type::dealer);
      socket.set(zmq::sockopt::routing_id, address_);
      socket.set(zmq::sockopt::linger, kLingerMs);
      socket.set(zmq::sockopt::sndhwm, 0);  // never full: this link bounds the queue itself, in bytes
      if (curve_) {
        socket.set(zmq::sockopt::curve_serverkey, *target.public_key);
        socket.set(zmq::sockopt::curve_publickey, curve_->own.public_key);
        socket.set(zmq::sockopt::curve_secretkey, curve_->own.secret_key);
      }
      socket.connect(target.endpoint);
      return dealers_.emplace(peer, Dealer{std::move(socket)}).first->second;
    } catch (const zmq::error_t& e) {
      throw make_error(ErrorKind::Peer, "cannot connect a link to \"", printable_name(peer), "\": ", e.what());
    }
  }

  // The connection to answer a sender on: one this link has, or a new one to a listed peer; null
  // for any other name a message gives, or when it cannot be made.
  Dealer* answerable(const std::string& peer) {
    if (const auto it = dealers_.find(peer); it != dealers_.end()) return &it->second;
    if (!gate_.listed(peer)) return nullptr;
    try {
      return &dealer_for(peer);
    } catch (const Error&) {
      return nullptr;
    }
  }

  // Whether a transfer of `bytes` to this peer is dropped: more than queue_bytes_ wait to leave.
  bool full(const Dealer& dealer, std::size_t bytes) {
    if (*dealer.queued <= queue_bytes_) return false;
    counters_.dropped += chunks_of(bytes, sent_.chunk_bytes());
    return true;
  }

  // One chunk frame: its kind, its header, and a payload part that holds its owner (a copy of the
  // payload without one) and counts in the peer's queue until ZeroMQ is done with it. ZeroMQ puts
  // no bound on the queue (full() is this link's), so the send never waits; it fails only when
  // ZeroMQ has dropped the connection for good (a peer that broke its protocol).
  bool put(Dealer& dealer, std::span<const std::byte> header, std::span<const std::byte> payload, KeptPayload owner) {
    if (owner == nullptr) {
      auto copy = std::make_shared<const std::vector<std::byte>>(payload.begin(), payload.end());
      payload = *copy;
      owner = std::move(copy);
    }
    auto hold = std::make_unique<PartHold>(PartHold{std::move(owner), dealer.queued, payload.size() + kFrameCost});
    *dealer.queued += hold->cost;
    zmq::message_t last(const_cast<std::byte*>(payload.data()), payload.size(), &PartHold::release, hold.get());
    hold.release();  // the message's now: released when ZeroMQ is done with the payload
    constexpr auto more = zmq::send_flags::sndmore | zmq::send_flags::dontwait;
    try {
      return dealer.socket.send(zmq::buffer(&kChunkFrame, 1), more) &&
             dealer.socket.send(zmq::buffer(header.data(), header.size()), more) &&
             dealer.socket.send(last, zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
      return false;  // counted as dropped, as a frame lost on the way
    }
  }

  // Sends `frames` (of a payload `owner` holds: all of a transfer, or one asked for again), as
  // faults_ make them.
  void send_frames(Dealer& dealer, std::span<const Frame> frames, const KeptPayload& owner) {
    const auto wire = faults_.wire(frames, owner, counters_);
    for (std::size_t i = 0; i < wire.size(); ++i) {
      if (!put(dealer, wire[i].header, wire[i].payload, wire[i].owner)) {
        counters_.dropped += wire.size() - i;
        return;
      }
      ++counters_.frames_sent;
      counters_.bytes_sent += wire[i].payload.size();
    }
  }

  // Handles one waiting message; false when none was waiting. Sets `delivered` when the message
  // completed a transfer.
  bool handle_next(std::optional<Received>& delivered) {
    zmq::message_t identity;
    try {
      if (!router_.recv(identity, zmq::recv_flags::dontwait)) return false;
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) return false;
      throw make_error(ErrorKind::Io, "link receive failed: ", e.what());
    }
    // Keeps the first three parts; a peer's extra parts are read and dropped so the next message
    // starts clean.
    std::vector<zmq::message_t> parts;
    std::size_t count = 0;
    for (bool more = identity.more(); more; ++count) {
      zmq::message_t part;
      if (!router_.recv(part, zmq::recv_flags::dontwait)) break;  // ZeroMQ delivers parts atomically
      more = part.more();
      if (parts.size() < 3) parts.push_back(std::move(part));
    }
    ++counters_.frames_received;
    const std::string peer = identity.to_string();
    if (curve_ && !proves_key(parts, peer)) {
      gate_.refuse(printable_name(split_curve_address(peer).endpoint) + " (not with its key)");
      ++counters_.strangers;
      return true;
    }
    if (!gate_.let_in(peer)) {
      ++counters_.strangers;
      return true;
    }
    const std::byte kind = parts.empty() || parts[0].size() != 1 ? std::byte{0} : *parts[0].data<std::byte>();
    if (kind == kChunkFrame && count == 3) {
      on_chunk(peer, parts[1], parts[2], delivered);
    } else if (kind == kRerequestFrame && count == 2 && parts[1].size() == Rerequest::kBytes) {
      on_rerequest(peer, bytes_of(parts[1]));
    } else {
      ++counters_.rejected;
    }
    return true;
  }

  // Whether the message's connection proved (ZAP's User-Id) the key the sender's address names.
  // The routing id part is the ROUTER's own: the metadata rides on the parts that came on the wire.
  static bool proves_key(const std::vector<zmq::message_t>& parts, const std::string& peer) {
    const auto claimed = split_curve_address(peer).public_key;
    if (!claimed || parts.empty()) return false;
    const char* proved = zmq_msg_gets(parts[0].handle(), "User-Id");
    return proved != nullptr && *claimed == proved;
  }

  void on_chunk(const std::string& peer, const zmq::message_t& header, const zmq::message_t& payload,
                std::optional<Received>& delivered) {
    auto outcome = incoming_.add(peer, bytes_of(header), bytes_of(payload), counters_);
    if (outcome.rerequest) rerequest(peer, decode_chunk_header(bytes_of(header)).transfer_id, *outcome.rerequest);
    if (outcome.delivered) delivered = std::move(outcome.delivered);
  }

  void rerequest(const std::string& peer, std::uint64_t transfer_id, std::uint32_t index) {
    const auto body = Rerequest{transfer_id, index}.encode();
    Dealer* dealer = answerable(peer);
    if (dealer == nullptr || full(*dealer, 0)) return;
    constexpr auto more = zmq::send_flags::sndmore | zmq::send_flags::dontwait;
    try {
      if (dealer->socket.send(zmq::buffer(&kRerequestFrame, 1), more) &&
          dealer->socket.send(zmq::buffer(body.data(), body.size()), zmq::send_flags::dontwait)) {
        ++counters_.rerequests;
        return;
      }
    } catch (const zmq::error_t&) {
    }
    ++counters_.dropped;
  }

  void on_rerequest(const std::string& peer, std::span<const std::byte> body) {
    const auto asked = Rerequest::decode(body);
    const KeptTransfers::Sent* sent = sent_.find(peer, asked);
    if (sent == nullptr) {
      ++counters_.rejected;
      return;
    }
    Dealer* dealer = answerable(peer);
    if (dealer == nullptr || full(*dealer, sent->frames[asked.index].payload.size())) return;
    send_frames(*dealer, std::span<const Frame>(sent->frames).subspan(asked.index, 1), sent->owner);
  }

  std::size_t queue_bytes_;
  FaultInjector faults_;
  KeptTransfers sent_;
  std::optional<LinkCurve> curve_;
  zmq::context_t context_{1};
  std::unique_ptr<ZapHandler> zap_;  // before router_: bound before it binds, gone after it closes
  zmq::socket_t router_;
  std::string address_;
  std::map<std::string, Dealer> dealers_;
  PeerGate gate_;
  IncomingTransfers incoming_;
  Counters counters_;
};

}  // namespace

std::unique_ptr<Link> make_zmq_link(const std::string& bind_address, std::size_t chunk_bytes,
                                    const LinkFaults& faults, std::uint16_t port, std::size_t queue_bytes,
                                    std::optional<LinkCurve> curve) {
  return std::make_unique<ZmqLink>(bind_address, chunk_bytes, faults, port, queue_bytes, std::move(curve));
}

}  // namespace meridian
