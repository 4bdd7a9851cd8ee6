#pragma once
// Cap'n Proto messages to and from plain bytes, for every schema of transport/schemas.
#include <capnp/message.h>
#include <kj/array.h>

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

namespace meridian {

// The flat (unpacked, single-segment-table) encoding of a built message.
std::vector<std::byte> message_bytes(capnp::MessageBuilder& message);

// An 8-byte aligned copy of received bytes, ready for capnp::FlatArrayMessageReader, which reads
// in place and needs word alignment that network buffers do not guarantee. Error(Peer) naming
// `what` when the bytes are empty or not a whole number of words.
kj::Array<capnp::word> aligned_words(std::span<const std::byte> bytes, std::string_view what);

}  // namespace meridian
