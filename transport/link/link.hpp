#pragma once
// The narrow interface through which a site moves payloads to other sites (see DESIGN.md,
// "Cross-site exchange"). A transfer is cut into the chunk frames of transport/chunking; a Link
// carries them, re-requests chunks that arrive damaged and hands out only whole, verified transfers.
// Implementations (ZeroMQ now, UCX later) share tests/transport/test_link.cpp.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "transport/chunking/chunker.hpp"

namespace meridian {

// How much a link holds waiting to leave for one peer before it drops that peer's transfers.
inline constexpr std::size_t kLinkQueueBytes = std::size_t{1} << 30;

struct Received {
  std::string peer;  // the sender's address(), which is also where to send an answer
  std::uint64_t transfer_id;
  std::uint16_t tag;
  std::vector<std::byte> bytes;
};

// Damage a link does to its own outgoing frames, for tests only: each frame sent (re-sends
// included) draws from a generator seeded with `seed`, so a run is reproducible. Corruption and
// truncation hit the payload, which the receiver can attribute to a chunk and re-request. A
// reordered frame is held back and sent right after the next frame of the same send (a transfer,
// or the answer to a re-request): the last one has no next frame and is never held, so nothing
// waits for a frame that may never come. See faults.hpp.
struct LinkFaults {
  double corrupt_probability = 0;
  double duplicate_probability = 0;
  double truncate_probability = 0;
  double reorder_probability = 0;
  std::uint64_t seed = 0;
};

// One direction-agnostic endpoint of a site: listens on its own address, connects to peers by
// address. Used by one thread at a time.
class Link {
 public:
  struct Counters {
    std::uint64_t frames_sent = 0;      // chunk frames put on the wire, re-sends and duplicates included
    std::uint64_t frames_received = 0;  // every message that arrived, well-formed or not
    std::uint64_t rejected = 0;         // frames refused (malformed, failed checksum, inconsistent)
    std::uint64_t duplicates = 0;       // chunks that had already been accepted or delivered
    std::uint64_t rerequests = 0;       // chunks this link asked a sender for again
    std::uint64_t dropped = 0;          // frames not sent: their peer's queue was full (see send)
    std::uint64_t strangers = 0;        // frames refused from senders not among the peers (set_peers)
    std::uint64_t bytes_sent = 0;       // payload bytes of the frames sent
    // Faults this link did to its own frames (LinkFaults; tests only), by kind, and their sum.
    std::uint64_t corrupted = 0;   // frames sent with a byte of their payload flipped
    std::uint64_t duplicated = 0;  // frames sent twice in a row
    std::uint64_t truncated = 0;   // frames sent with half their payload
    std::uint64_t reordered = 0;   // frames sent after the frame that followed them
    std::uint64_t faults_injected = 0;
  };

  virtual ~Link() = default;
  // Where peers reach this link, e.g. tcp://127.0.0.1:PORT.
  virtual std::string address() const = 0;
  // Sends one transfer (all its frames) to peer; returns once handed to the transport, not when
  // acknowledged. It never waits for a peer: while more than the link's queue_bytes (given where
  // it is made) wait to leave for that peer (one that is dead, stopped or far behind takes
  // nothing), the whole transfer is dropped and its frames counted, like frames lost on the way,
  // and the protocol asks again for what it misses. The link keeps the frames of its recent transfers to answer re-requests: this
  // form keeps a copy of payload (made in the pass that hashes it).
  virtual void send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
                    std::span<const std::byte> payload) = 0;
  // The same, sharing payload instead of copying it: the link holds on to it (as long as it keeps
  // the transfer, and until the transport is done with its frames), so it must not change any more.
  // For a payload the caller keeps anyway, or sends to several peers.
  virtual void send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
                    std::shared_ptr<const std::vector<std::byte>> payload) = 0;
  // The same, with the payload's chunk hashes taken where it was produced (chunk_hashes of
  // transport/chunking, with this link's chunk_bytes()): the link sends at once, reading nothing
  // of the payload. It trusts them only to build its headers; the receiver checks every chunk as
  // always, so a wrong hash gets that chunk refused (and its transfer never delivered), never
  // accepted. Hashes for another chunk size, or not one per chunk, are a caller bug.
  virtual void send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
                    std::shared_ptr<const std::vector<std::byte>> payload, ChunkHashes hashes) = 0;
  // The size a transfer is cut into chunks of (the last may be shorter).
  virtual std::size_t chunk_bytes() const = 0;
  // Waits up to `timeout` for the next complete, verified transfer from any peer; nullopt on
  // timeout. Bad frames are refused and counted, a chunk that fails its checksum is re-requested
  // from its sender, and a transfer is delivered once. Re-requests from peers are answered here too.
  virtual std::optional<Received> receive(std::chrono::milliseconds timeout) = 0;
  // Hands back the bytes of a Received the caller is done with: the link assembles later
  // transfers into that memory instead of fresh pages (bounded; see buffer_pool.hpp).
  virtual void recycle(std::vector<std::byte> bytes) = 0;
  virtual Counters counters() const = 0;
  // The peers this link exchanges with from now on: the job's members' link addresses as the
  // control plane lists them (each call replaces the list). Frames from any other sender are then
  // refused before they hold any state, unless `vouch` (may be null; called inside receive())
  // says the sender is a member after all. Whatever the list, a link opens a connection only where
  // its caller sends or to a listed peer, never to a name a message gives (see peer_gate.hpp).
  virtual void set_peers(std::set<std::string> peers, std::function<bool(const std::string&)> vouch) = 0;
  // Senders refused since the last call, by printable name, with their frame counts (bounded).
  virtual std::map<std::string, std::uint64_t> take_refusals() = 0;
};

}  // namespace meridian
