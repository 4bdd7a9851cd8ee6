#include "transport/link/ucx_link.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <utility>

#include "core/util/error.hpp"
#include "transport/chunking/assembler.hpp"
#include "transport/link/faults.hpp"
#include "transport/link/incoming.hpp"
#include "transport/link/kept_bytes.hpp"
#include "transport/link/ucx_transport.hpp"

// Wire format. Every frame is one UCP active message (ucx_transport.cpp) whose header is
//   [kind byte] [length of the sender's address, 1 byte] [the sender's address] [body]
//   'D': body = an encoded ChunkHeader; the message's data is the chunk's payload
//   'R': body = transfer id u64 LE, chunk index u32 LE; no data   "send me this chunk again"
// A UCP receiver learns nothing about who sent a message, so each frame names its sender, as the
// DEALER's routing id does in zmq_link; it is what the peer claims, and answers go to it.

namespace meridian {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::byte kData{'D'};
constexpr std::byte kRerequest{'R'};
constexpr std::size_t kRerequestBytes = 12;
// The same bounds as zmq_link on the transfers kept to answer re-requests.
constexpr std::size_t kKeptTransfers = 64;
constexpr std::size_t kKeptBytes = std::size_t{1} << 30;

using Message = UcxTransport::Message;

std::size_t checked_chunk_bytes(std::size_t chunk_bytes) {
  MERIDIAN_CHECK(chunk_bytes > 0 && chunk_bytes <= kMaxChunkBytes, "chunk_bytes=", chunk_bytes);
  return chunk_bytes;
}

class UcxLink final : public Link {
 public:
  UcxLink(const std::string& bind_address, std::size_t chunk_bytes, const LinkFaults& faults, std::uint16_t port)
      : faults_(faults),
        sent_(kKeptTransfers, kKeptBytes, checked_chunk_bytes(chunk_bytes)),
        transport_(bind_address, kMaxChunkBytes, port,
                   [this](std::span<const std::byte> header, std::size_t length) { return place(header, length); }) {
    // Every frame's header carries the address and at most a chunk header.
    const std::size_t largest = 2 + address().size() + encode_chunk_header({}).size();
    if (address().size() > 255 || largest > transport_.max_header())
      throw make_error(ErrorKind::Io, "UCX allows active-message headers of only ", transport_.max_header(), " bytes");
  }

  std::string address() const override { return transport_.address(); }
  Counters counters() const override { return counters_; }
  void recycle(std::vector<std::byte> bytes) override { incoming_.recycle(std::move(bytes)); }

  void send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
            std::span<const std::byte> payload) override {
    if (!UcxTransport::valid_address(peer))
      throw make_error(ErrorKind::Peer, "\"", peer, "\" is not a UCX link address (ucx://IP:PORT)");
    const auto& sent = sent_.keep(peer, transfer_id, tag, payload);
    post(sent, sent.frames);
  }

  void send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
            std::shared_ptr<const std::vector<std::byte>> payload) override {
    MERIDIAN_CHECK(payload != nullptr, "no payload");
    if (!UcxTransport::valid_address(peer))
      throw make_error(ErrorKind::Peer, "\"", peer, "\" is not a UCX link address (ucx://IP:PORT)");
    const auto& sent = sent_.keep(peer, transfer_id, tag, std::move(payload));
    post(sent, sent.frames);
  }

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

  // Sends `frames` of the transfer `sent` (all of them, or one asked for again), as faults_ make them.
  void post(const KeptTransfers::Sent& sent, std::span<const Frame> frames) {
    std::vector<Message> messages;
    for (const WireFrame& w : faults_.wire(frames, sent.owner, counters_)) {
      Message m = message(sent.peer, kData, w.header);
      m.data = w.payload;
      m.owner = w.owner;
      ++counters_.frames_sent;
      counters_.bytes_sent += m.data.size();
      messages.push_back(std::move(m));
    }
    transport_.post(std::move(messages));
  }

  void handle(const UcxTransport::Arrival& in, std::optional<Received>& delivered) {
    ++counters_.frames_received;
    const auto h = in.header();
    if (!in.refused() && h.size() >= 2 && h.size() >= 2 + std::size_t(h[1])) {
      const std::string peer(reinterpret_cast<const char*>(h.data()) + 2, std::size_t(h[1]));
      const auto body = h.subspan(2 + std::size_t(h[1]));
      if (h[0] == kData && in.placed() != nullptr)
        return on_landed(std::static_pointer_cast<IncomingTransfers::Claim>(in.placed()), delivered);
      if (h[0] == kData) return on_chunk(peer, body, in.data(), delivered);
      if (h[0] == kRerequest && body.size() == kRerequestBytes && in.data().empty()) return on_rerequest(peer, body);
    }
    ++counters_.rejected;
  }

  void on_chunk(const std::string& peer, std::span<const std::byte> header, std::span<const std::byte> payload,
                std::optional<Received>& delivered) {
    auto outcome = incoming_.add(peer, header, payload, counters_);
    if (outcome.rerequest) rerequest(peer, decode_chunk_header(header).transfer_id, *outcome.rerequest);
    if (outcome.delivered) delivered = std::move(outcome.delivered);
  }

  // On the transport's progress thread, for a message whose data is about to be fetched: a chunk
  // frame's payload goes straight to its place in the transfer being assembled, when it can.
  std::optional<UcxTransport::Place> place(std::span<const std::byte> h, std::size_t length) {
    if (h.size() < 2 || h[0] != kData || h.size() < 2 + std::size_t(h[1])) return std::nullopt;
    const std::string peer(reinterpret_cast<const char*>(h.data()) + 2, std::size_t(h[1]));
    auto place = incoming_.place(peer, h.subspan(2 + std::size_t(h[1])), length);
    if (!place) return std::nullopt;
    return UcxTransport::Place{place->bytes, std::move(place->claim)};
  }

  void on_landed(const std::shared_ptr<IncomingTransfers::Claim>& claim, std::optional<Received>& delivered) {
    auto outcome = incoming_.landed(claim, counters_);
    if (outcome.rerequest) rerequest(claim->peer(), claim->header().transfer_id, *outcome.rerequest);
    if (outcome.delivered) delivered = std::move(outcome.delivered);
  }

  void rerequest(const std::string& peer, std::uint64_t transfer_id, std::uint32_t index) {
    if (!UcxTransport::valid_address(peer)) return;  // what the peer claims to be; not an address: no answer
    std::byte body[kRerequestBytes];
    for (int i = 0; i < 8; ++i) body[i] = static_cast<std::byte>(transfer_id >> (8 * i));
    for (int i = 0; i < 4; ++i) body[8 + i] = static_cast<std::byte>(index >> (8 * i));
    std::vector<Message> messages;
    messages.push_back(message(peer, kRerequest, body));
    transport_.post(std::move(messages));
    ++counters_.rerequests;
  }

  void on_rerequest(const std::string& peer, std::span<const std::byte> body) {
    std::uint64_t transfer_id = 0;
    std::uint32_t index = 0;
    for (int i = 0; i < 8; ++i) transfer_id |= std::uint64_t(body[i]) << (8 * i);
    for (int i = 0; i < 4; ++i) index |= std::uint32_t(body[8 + i]) << (8 * i);
    // Only transfers sent to that very peer are answered (find): nobody else may pull them.
    const KeptTransfers::Sent* sent = sent_.find(peer, transfer_id);
    if (sent == nullptr || index >= sent->frames.size()) {
      ++counters_.rejected;
      return;
    }
    post(*sent, std::span<const Frame>(sent->frames).subspan(index, 1));
  }

  FaultInjector faults_;
  KeptTransfers sent_;
  IncomingTransfers incoming_;
  Counters counters_;
  UcxTransport transport_;
};

}  // namespace

std::unique_ptr<Link> make_ucx_link(const std::string& bind_address, std::size_t chunk_bytes,
                                    const LinkFaults& faults, std::uint16_t port) {
  return std::make_unique<UcxLink>(bind_address, chunk_bytes, faults, port);
}

}  // namespace meridian
