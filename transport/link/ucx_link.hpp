#pragma once
// The UCX Link: chunk frames as UCP active messages, over the UCX transport of ucx_transport.hpp
// (a listener on an ephemeral port, one endpoint per peer, driven by a thread of its own, as
// ZeroMQ's I/O thread drives zmq_link). Each frame's header names its sender, so that the receiver
// knows whom to re-request from. Used by one thread at a time, like every Link: chunks are checked,
// re-requests answered and transfers delivered inside receive(). UCX is configured in code (TCP;
// the loopback device when bound to a loopback address), whatever UCX_* variables say.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "transport/chunking/chunker.hpp"
#include "transport/link/link.hpp"

namespace meridian {

// bind_address is an interface address ("127.0.0.1"); port 0 lets the system choose one, and
// address() is "ucx://IP:PORT" ("ucx://[IPv6]:PORT"). 0 < chunk_bytes <= kMaxChunkBytes.
// Error(Io) when UCX cannot start or the address cannot be bound.
std::unique_ptr<Link> make_ucx_link(const std::string& bind_address, std::size_t chunk_bytes = kDefaultChunkBytes,
                                    const LinkFaults& faults = {}, std::uint16_t port = 0,
                                    std::size_t queue_bytes = kLinkQueueBytes);

}  // namespace meridian
