#include "transport/link/ucx_link.hpp"

#include <algorithm>
#include <utility>

#include "core/util/error.hpp"
#include "transport/chunking/assembler.hpp"
#include "transport/link/faults.hpp"
#include "transport/link/incoming.hpp"
#include "transport/link/kept_bytes.hpp"
#include "transport/link/peer_gate.hpp"
#include "transport/link/ucx_transport.hpp"

// Wire format. Every frame is one UCP active message (ucx_transport.cpp) whose header is
//   [kind byte] [length of the sender's address, 1 byte] [the sender's address] [body]
//   'D': body = an encoded ChunkHeader; the message's data is the chunk's payload
//   'P': body = where a payload goes that is sent ahead of its chunk header: transfer id u64,
//        index u32, count u32, total bytes u64, offset u64, length u32 (LE); data = the payload
//   'H': body = the encoded ChunkHeader of a payload sent ahead in a 'P'; no data. Fenced: it
//        leaves once the peer has fetched every 'P' sent to it before
//   'R': body = transfer id u64 LE, chunk index u32 LE; no data   "send me this chunk again"
// A UCP receiver learns nothing about who sent a message, so each frame names its sender, as the
// DEALER's routing id does in zmq_link; it is what the peer claims, and answers go to it only when
// this link sent to it before or it is a listed peer (peer_gate.hpp): never to a new address.
//
// A large payload the caller shares (the form CrossSite sends its deltas in) goes out as 'P'
// frames at once, while the link hashes it, and its headers follow as 'H' frames: every chunk
// header carries the hash of all chunks' hashes, so a 'D' frame can leave only once the whole
// payload is hashed (~8 ms for 256 MiB on two cores), where the payload could have been on its way.
// The receiver places and hashes each payload as it lands and checks it when its header comes (a
// header that finds no payload has the chunk asked for again). Chunks asked for again, smaller
// payloads, the copying form and payloads handed over with their chunk hashes (nothing to wait
// for) are 'D' frames.

namespace meridian {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::byte kAhead{'P'};
constexpr std::byte kHeader{'H'};
constexpr std::size_t kPlacementBytes = 36;
// Shared payloads from this size on go out ahead of their headers.
constexpr std::size_t kAheadBytes = std::size_t{16} << 20;

using Message = UcxTransport::Message;

std::size_t checked_chunk_bytes(std::size_t chunk_bytes) {
  MERIDIAN_CHECK(chunk_bytes > 0 && chunk_bytes <= kMaxChunkBytes, "chunk_bytes=", chunk_bytes);
  return chunk_bytes;
}

template <class T>
void put_le(std::vector<std::byte>& out, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<std::byte>(v >> (8 * i)));
}

template <class T>
T get_le(std::span<const std::byte> in, std::size_t at) {
  T v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= T(std::to_integer<std::uint8_t>(in[at + i])) << (8 * i);
  return v;
}

std::vector<std::byte> encode_placement(const Assembler::Placement& p) {
  std::vector<std::byte> out;
  out.reserve(kPlacementBytes);
  put_le(out, p.transfer_id);
  put_le(out, p.index);
  put_le(out, p.count);
  put_le(out, p.total_bytes);
  put_le(out, p.offset);
  put_le(out, p.length);
  return out;
}

std::optional<Assembler::Placement> decode_placement(std::span<const std::byte> body) {
  if (body.size() != kPlacementBytes) return std::nullopt;
  return Assembler::Placement{get_le<std::uint64_t>(body, 0),  get_le<std::uint32_t>(body, 8),
                              get_le<std::uint32_t>(body, 12), get_le<std::uint64_t>(body, 16),
                              get_le<std::uint64_t>(body, 24), get_le<std::uint32_t>(body, 32)};
}

class UcxLink final : public Link {
 public:
  UcxLink(const std::string& bind_address, std::size_t chunk_bytes, const LinkFaults& faults, std::uint16_t port,
          std::size_t queue_bytes)
      : faults_(faults),
        chunk_bytes_(checked_chunk_bytes(chunk_bytes)),
        sent_(chunk_bytes),
        transport_(
            bind_address, kMaxChunkBytes, port,
            [this](std::span<const std::byte> header, std::size_t length) { return place(header, length); },
            queue_bytes) {
    // Every frame's header carries the address and at most a chunk header.
    const std::size_t largest = 2 + address().size() + std::max(encode_chunk_header({}).size(), kPlacementBytes);
    if (address().size() > 255 || largest > transport_.max_header())
      throw make_error(ErrorKind::Io, "UCX allows active-message headers of only ", transport_.max_header(), " bytes");
  }

  std::string address() const override { return transport_.address(); }
  Counters counters() const override { return counters_; }
  void recycle(std::vector<std::byte> bytes) override { incoming_.recycle(std::move(bytes)); }
  std::map<std::string, std::uint64_t> take_refusals() override { return gate_.take_refusals(); }

  void set_peers(std::set<std::string> peers, std::function<bool(const std::string&)> vouch) override {
    std::erase_if(contacted_, [&](const std::string& peer) { return !peers.contains(peer); });
    gate_.set(std::move(peers), std::move(vouch));
  }

  void send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
            std::span<const std::byte> payload) override {
    contact(peer);
    const auto& sent = sent_.keep(peer, transfer_id, tag, payload);
    post(kChunkFrame, sent.peer, sent.frames, sent.owner);
  }

  void send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
            std::shared_ptr<const std::vector<std::byte>> payload) override {
    MERIDIAN_CHECK(payload != nullptr, "no payload");
    contact(peer);
    const std::size_t size = payload->size();
    const std::size_t count = (size + chunk_bytes_ - 1) / chunk_bytes_;
    // (Too many chunks or bytes: keep() refuses the transfer before anything leaves.)
    if (size < kAheadBytes || count < 2 || count > kMaxChunks || size > kMaxTransferBytes) {
      const auto& sent = sent_.keep(peer, transfer_id, tag, std::move(payload));
      post(kChunkFrame, sent.peer, sent.frames, sent.owner);
      return;
    }
    // The payloads leave now; the headers once the payload is hashed (keep() below), after them.
    std::vector<Frame> ahead(count);
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t at = i * chunk_bytes_, length = std::min(chunk_bytes_, size - at);
      ahead[i].header = encode_placement({transfer_id, static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(count),
                                          size, at, static_cast<std::uint32_t>(length)});
      ahead[i].payload = std::span<const std::byte>(*payload).subspan(at, length);
    }
    if (!post(kAhead, peer, ahead, payload)) return;  // kept for nobody: no chunk of it will be asked for
    // Hashed by this thread alone: the transport's threads need the other core to move the payloads.
    const auto& sent = sent_.keep(peer, transfer_id, tag, std::move(payload), false);
    std::vector<Frame> headers(sent.frames.size());
    for (std::size_t i = 0; i < headers.size(); ++i) headers[i].header = sent.frames[i].header;
    post(kHeader, peer, headers, sent.owner, true);
  }

  // Hashed already: every frame, header and all, leaves at once.
  void send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
            std::shared_ptr<const std::vector<std::byte>> payload, ChunkHashes hashes) override {
    MERIDIAN_CHECK(payload != nullptr, "no payload");
    contact(peer);
    const auto& sent = sent_.keep(peer, transfer_id, tag, std::move(payload), hashes);
    post(kChunkFrame, sent.peer, sent.frames, sent.owner);
  }

  std::size_t chunk_bytes() const override { return chunk_bytes_; }

  std::optional<Received> receive(milliseconds timeout) override {
    // What already arrived is handled before the clock is looked at (next() takes it at once), so
    // that a zero timeout still makes progress.
    const auto deadline = Clock::now() + timeout;
    std::optional<Received> delivered;
    while (auto in = transport_.next(deadline)) {
      handle(*in, delivered);
      if (delivered) return delivered;
    }
    return std::nullopt;
  }

 private:
  // A peer the caller sends to, which re-requests may go to from now on. Error(Peer) for a string
  // that is no UCX link address.
  void contact(const std::string& peer) {
    if (!UcxTransport::valid_address(peer))
      throw make_error(ErrorKind::Peer, "\"", printable_name(peer), "\" is not a UCX link address (ucx://IP:PORT)");
    contacted_.insert(peer);
  }

  Message message(const std::string& peer, std::byte kind, std::span<const std::byte> body) const {
    Message m{peer, {}, {}, nullptr};
    const std::string& from = transport_.address();
    m.header.reserve(2 + from.size() + body.size());
    m.header.push_back(kind);
    m.header.push_back(static_cast<std::byte>(from.size()));
    for (const char c : from) m.header.push_back(static_cast<std::byte>(c));
    m.header.insert(m.header.end(), body.begin(), body.end());
    return m;
  }

  // Sends `frames` of kind `kind` to peer (all of a transfer's, or one asked for again), their
  // payloads held by `owner`, as faults_ make them; fenced: after all sent to peer before. All
  // are dropped while the peer's queue is full (false), unless they are headers of payloads
  // already sent ahead (a fence): those would otherwise wait at the peer for nothing.
  bool post(std::byte kind, const std::string& peer, std::span<const Frame> frames,
            const std::shared_ptr<const void>& owner, bool fence = false) {
    std::vector<Message> messages;
    std::size_t bytes = 0;
    for (const WireFrame& w : faults_.wire(frames, owner, counters_)) {
      Message m = message(peer, kind, w.header);
      m.data = w.payload;
      m.owner = w.owner;
      m.fence = fence;
      bytes += m.data.size();
      messages.push_back(std::move(m));
    }
    const std::size_t count = messages.size();
    if (!transport_.post(std::move(messages), !fence)) {
      counters_.dropped += count;
      return false;
    }
    counters_.frames_sent += count;
    counters_.bytes_sent += bytes;
    return true;
  }

  void handle(const UcxTransport::Arrival& in, std::optional<Received>& delivered) {
    ++counters_.frames_received;
    const auto h = in.header();
    if (!in.refused() && h.size() >= 2 && h.size() >= 2 + std::size_t(h[1])) {
      const std::string peer(reinterpret_cast<const char*>(h.data()) + 2, std::size_t(h[1]));
      const auto body = h.subspan(2 + std::size_t(h[1]));
      if (!gate_.let_in(peer)) {
        ++counters_.strangers;
        return;
      }
      if ((h[0] == kChunkFrame || h[0] == kAhead) && in.placed() != nullptr)
        return on_landed(std::static_pointer_cast<IncomingTransfers::Claim>(in.placed()), delivered);
      if (h[0] == kChunkFrame) return on_chunk(peer, body, in.data(), delivered);
      if (h[0] == kAhead) {
        if (const auto p = decode_placement(body))
          return deliver(incoming_.add(peer, *p, in.data(), counters_), delivered);
      }
      if (h[0] == kHeader && in.data().empty()) return on_header(peer, body, delivered);
      if (h[0] == kRerequestFrame && body.size() == Rerequest::kBytes && in.data().empty())
        return on_rerequest(peer, body);
    }
    ++counters_.rejected;
  }

  void deliver(IncomingTransfers::Outcome outcome, std::optional<Received>& delivered) {
    if (outcome.delivered) delivered = std::move(outcome.delivered);
  }

  void on_chunk(const std::string& peer, std::span<const std::byte> header, std::span<const std::byte> payload,
                std::optional<Received>& delivered) {
    auto outcome = incoming_.add(peer, header, payload, counters_);
    if (outcome.rerequest) rerequest(peer, decode_chunk_header(header).transfer_id, *outcome.rerequest);
    deliver(std::move(outcome), delivered);
  }

  void on_header(const std::string& peer, std::span<const std::byte> header, std::optional<Received>& delivered) {
    auto outcome = incoming_.confirm(peer, header, counters_);
    if (outcome.rerequest) rerequest(peer, decode_chunk_header(header).transfer_id, *outcome.rerequest);
    deliver(std::move(outcome), delivered);
  }

  // On the transport's progress thread, for a message whose data is about to be fetched: a chunk
  // frame's payload goes straight to its place in the transfer being assembled, when it can.
  std::optional<UcxTransport::Place> place(std::span<const std::byte> h, std::size_t length) {
    if (h.size() < 2 || h.size() < 2 + std::size_t(h[1])) return std::nullopt;
    const std::string peer(reinterpret_cast<const char*>(h.data()) + 2, std::size_t(h[1]));
    const auto body = h.subspan(2 + std::size_t(h[1]));
    if (!gate_.admits(peer)) return std::nullopt;  // refused in handle(), holding no place
    std::optional<IncomingTransfers::Place> place;
    if (h[0] == kChunkFrame) place = incoming_.place(peer, body, length);
    if (h[0] == kAhead)
      if (const auto p = decode_placement(body)) place = incoming_.place(peer, *p, length);
    if (!place) return std::nullopt;
    return UcxTransport::Place{place->bytes, std::move(place->claim)};
  }

  void on_landed(const std::shared_ptr<IncomingTransfers::Claim>& claim, std::optional<Received>& delivered) {
    auto outcome = incoming_.landed(claim, counters_);
    if (outcome.rerequest) rerequest(claim->peer(), claim->transfer_id(), *outcome.rerequest);
    deliver(std::move(outcome), delivered);
  }

  void rerequest(const std::string& peer, std::uint64_t transfer_id, std::uint32_t index) {
    // A name a message gives is never dialled: only a peer sent to before, or a listed one.
    if (!contacted_.contains(peer) && !(gate_.listed(peer) && UcxTransport::valid_address(peer))) return;
    const auto body = Rerequest{transfer_id, index}.encode();
    std::vector<Message> messages;
    messages.push_back(message(peer, kRerequestFrame, body));
    if (transport_.post(std::move(messages)))
      ++counters_.rerequests;
    else
      ++counters_.dropped;
  }

  void on_rerequest(const std::string& peer, std::span<const std::byte> body) {
    const auto asked = Rerequest::decode(body);
    const KeptTransfers::Sent* sent = sent_.find(peer, asked);
    if (sent == nullptr) {
      ++counters_.rejected;
      return;
    }
    post(kChunkFrame, sent->peer, std::span<const Frame>(sent->frames).subspan(asked.index, 1), sent->owner);
  }

  FaultInjector faults_;
  std::size_t chunk_bytes_;
  PeerGate gate_;
  std::set<std::string> contacted_;  // peers the caller sent to (the listed ones, once peers are set)
  KeptTransfers sent_;
  IncomingTransfers incoming_;
  Counters counters_;
  UcxTransport transport_;
};

}  // namespace

std::unique_ptr<Link> make_ucx_link(const std::string& bind_address, std::size_t chunk_bytes,
                                    const LinkFaults& faults, std::uint16_t port, std::size_t queue_bytes) {
  return std::make_unique<UcxLink>(bind_address, chunk_bytes, faults, port, queue_bytes);
}

}  // namespace meridian
