#pragma once
// The ZeroMQ Link: a ROUTER bound to an ephemeral port receives from every peer, and one DEALER
// per peer sends to it with this link's address as its routing id, so the receiving ROUTER learns
// whom to re-request from without any envelope of ours. See zmq_link.cpp for the wire format.
//
// Single-threaded: no I/O thread of its own. Re-requests from a receiver are answered while the
// sender is inside receive(); sites exchange in both directions, so each is there regularly.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <optional>
#include <set>

#include "transport/chunking/chunker.hpp"
#include "transport/link/curve.hpp"
#include "transport/link/link.hpp"

namespace meridian {

// A link that speaks CURVE (curve.hpp): its own keypair, and the job's public keys, the only ones
// it lets connect (zap_handler.hpp). Its address() then names its key, and it sends only to
// addresses that name one, proving that peer's key; a frame is taken in only from a sender that
// proved the key its address names.
struct LinkCurve {
  CurveKeypair own;
  std::set<std::string> job_keys;
};

// bind_address is an interface address ("127.0.0.1"); port 0 lets the system choose one (a site
// behind a firewall names its own in [[site]] port). 0 < chunk_bytes <= kMaxChunkBytes.
// Error(Io) when the address cannot be bound.
std::unique_ptr<Link> make_zmq_link(const std::string& bind_address, std::size_t chunk_bytes = kDefaultChunkBytes,
                                    const LinkFaults& faults = {}, std::uint16_t port = 0,
                                    std::size_t queue_bytes = kLinkQueueBytes,
                                    std::optional<LinkCurve> curve = std::nullopt);

}  // namespace meridian
