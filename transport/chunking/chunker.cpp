#include "transport/chunking/chunker.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "core/util/error.hpp"
#include "core/util/hash.hpp"
#include "transport/schemas/chunk.capnp.h"
#include "transport/schemas/wire_bytes.hpp"

namespace meridian {
namespace {

// An encoded header is about 100 bytes; anything much larger is not one, and copying it would let
// a peer make us allocate at will.
constexpr std::size_t kMaxHeaderBytes = 1024;
constexpr capnp::ReaderOptions kReaderOptions{kMaxHeaderBytes / sizeof(capnp::word), 4};

// Fixed byte order so that sites of any endianness agree on the hash.
std::uint64_t header_hash(std::uint16_t version, const ChunkHeader& h) {
  const std::array<std::uint64_t, 10> fields{version,  h.transfer_id, h.tag,    h.index,        h.count,
                                             h.total_bytes, h.offset, h.length, h.payload_hash, h.total_hash};
  std::array<unsigned char, fields.size() * 8> bytes{};
  for (std::size_t i = 0; i < fields.size(); ++i)
    for (std::size_t b = 0; b < 8; ++b) bytes[i * 8 + b] = static_cast<unsigned char>(fields[i] >> (8 * b));
  return hash64(bytes.data(), bytes.size());
}

}  // namespace

std::vector<std::byte> encode_chunk_header(const ChunkHeader& h) {
  capnp::MallocMessageBuilder message;
  auto w = message.initRoot<wire::ChunkHeader>();
  w.setVersion(wire::CHUNK_SCHEMA_VERSION);
  w.setTransferId(h.transfer_id);
  w.setTag(h.tag);
  w.setIndex(h.index);
  w.setCount(h.count);
  w.setTotalBytes(h.total_bytes);
  w.setOffset(h.offset);
  w.setLength(h.length);
  w.setPayloadHash(h.payload_hash);
  w.setTotalHash(h.total_hash);
  w.setHeaderHash(header_hash(wire::CHUNK_SCHEMA_VERSION, h));
  return message_bytes(message);
}

ChunkHeader decode_chunk_header(std::span<const std::byte> bytes) {
  if (bytes.size() > kMaxHeaderBytes)
    throw make_error(ErrorKind::Peer, "a chunk header of ", bytes.size(), " bytes is longer than any valid one");
  const auto words = aligned_words(bytes, "a chunk header");
  try {
    capnp::FlatArrayMessageReader reader(words, kReaderOptions);
    const auto r = reader.getRoot<wire::ChunkHeader>();
    if (r.getVersion() != wire::CHUNK_SCHEMA_VERSION)
      throw make_error(ErrorKind::Peer, "chunk header has schema version ", r.getVersion(), ", expected ",
                       wire::CHUNK_SCHEMA_VERSION);
    ChunkHeader h;
    h.transfer_id = r.getTransferId();
    h.tag = r.getTag();
    h.index = r.getIndex();
    h.count = r.getCount();
    h.total_bytes = r.getTotalBytes();
    h.offset = r.getOffset();
    h.length = r.getLength();
    h.payload_hash = r.getPayloadHash();
    h.total_hash = r.getTotalHash();
    if (r.getHeaderHash() != header_hash(r.getVersion(), h))
      throw make_error(ErrorKind::Peer, "chunk header fails its header checksum");
    return h;
  } catch (const kj::Exception& e) {
    throw make_error(ErrorKind::Peer, "malformed chunk header: ", e.getDescription().cStr());
  }
}

std::vector<Frame> make_frames(std::uint64_t transfer_id, std::uint16_t tag, std::span<const std::byte> payload,
                               std::size_t chunk_bytes) {
  MERIDIAN_CHECK(chunk_bytes > 0 && chunk_bytes <= kMaxChunkBytes, "chunk_bytes=", chunk_bytes);
  MERIDIAN_CHECK(payload.size() <= kMaxTransferBytes, "payload of ", payload.size(), " bytes");
  const std::size_t count = std::max<std::size_t>(1, (payload.size() + chunk_bytes - 1) / chunk_bytes);
  MERIDIAN_CHECK(count <= kMaxChunks, count, " chunks of ", chunk_bytes, " bytes: use larger chunks");
  ChunkHeader h;
  h.transfer_id = transfer_id;
  h.tag = tag;
  h.count = static_cast<std::uint32_t>(count);
  h.total_bytes = payload.size();
  h.total_hash = hash64(payload);
  std::vector<Frame> frames;
  frames.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const auto part = payload.subspan(i * chunk_bytes, std::min(chunk_bytes, payload.size() - i * chunk_bytes));
    h.index = static_cast<std::uint32_t>(i);
    h.offset = i * chunk_bytes;
    h.length = static_cast<std::uint32_t>(part.size());
    h.payload_hash = hash64(part);
    frames.push_back({encode_chunk_header(h), part});
  }
  return frames;
}

}  // namespace meridian
