#include "transport/schemas/wire_bytes.hpp"

#include <capnp/serialize.h>

#include <cstring>

#include "core/util/error.hpp"

namespace meridian {

std::vector<std::byte> message_bytes(capnp::MessageBuilder& message) {
  const auto words = capnp::messageToFlatArray(message);
  const auto bytes = words.asBytes();
  std::vector<std::byte> out(bytes.size());
  std::memcpy(out.data(), bytes.begin(), bytes.size());
  return out;
}

kj::Array<capnp::word> aligned_words(std::span<const std::byte> bytes, std::string_view what) {
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0)
    throw make_error(ErrorKind::Peer, what, " of ", bytes.size(), " bytes is not a whole number of 8-byte words");
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  return words;
}

}  // namespace meridian
