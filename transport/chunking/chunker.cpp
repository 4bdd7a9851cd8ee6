#include "transport/chunking/chunker.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#if defined(__x86_64__)
#include <xxh_x86dispatch.h>  // libxxhash's entry points that pick SSE2, AVX2 or AVX-512 at run time
#else
#include <xxhash.h>
#endif

#include <algorithm>
#include <array>
#include <cstring>
#include <system_error>
#include <thread>

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

std::uint64_t total_hash_of(std::span<const std::uint64_t> chunk_hashes) {
  Hasher64 total;
  for (const std::uint64_t v : chunk_hashes) {
    std::array<unsigned char, 8> bytes{};
    for (std::size_t b = 0; b < 8; ++b) bytes[b] = static_cast<unsigned char>(v >> (8 * b));
    total.update(bytes.data(), bytes.size());
  }
  return total.digest();
}

namespace {

// libxxhash's plain entry points use SSE2 only: a hot 4 MiB chunk hashes about twice as fast with AVX2.
#if defined(__x86_64__)
std::uint64_t xxh3(const void* data, std::size_t size) { return XXH3_64bits_dispatch(data, size); }
void xxh3_update(XXH3_state_t* state, const void* data, std::size_t size) {
  XXH3_64bits_update_dispatch(state, data, size);
}
#else
std::uint64_t xxh3(const void* data, std::size_t size) { return XXH3_64bits(data, size); }
void xxh3_update(XXH3_state_t* state, const void* data, std::size_t size) { XXH3_64bits_update(state, data, size); }
#endif

}  // namespace

std::uint64_t payload_hash(std::span<const std::byte> bytes) { return xxh3(bytes.data(), bytes.size()); }

std::uint64_t copy_and_hash(std::span<const std::byte> from, std::byte* to) {
  // Pieces small enough to be hashed from L1/L2 right after they are copied.
  constexpr std::size_t kPiece = std::size_t{64} << 10;
  if (from.size() <= kPiece) {
    if (!from.empty()) std::memcpy(to, from.data(), from.size());
    return xxh3(to, from.size());
  }
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_64bits_reset(&state);
  for (std::size_t at = 0; at < from.size(); at += kPiece) {
    const std::size_t n = std::min(kPiece, from.size() - at);
    std::memcpy(to + at, from.data() + at, n);
    xxh3_update(&state, to + at, n);
  }
  return XXH3_64bits_digest(&state);
}

namespace {

// Payloads from this size on are hashed by two threads.
constexpr std::size_t kTwoThreadBytes = std::size_t{16} << 20;

std::size_t chunk_count(std::size_t size, std::size_t chunk_bytes) {
  MERIDIAN_CHECK(chunk_bytes > 0 && chunk_bytes <= kMaxChunkBytes, "chunk_bytes=", chunk_bytes);
  MERIDIAN_CHECK(size <= kMaxTransferBytes, "payload of ", size, " bytes");
  const std::size_t count = std::max<std::size_t>(1, (size + chunk_bytes - 1) / chunk_bytes);
  MERIDIAN_CHECK(count <= kMaxChunks, count, " chunks of ", chunk_bytes, " bytes: use larger chunks");
  return count;
}

// The hashes of payload's chunks; copy: where payload is copied to on the way, or empty.
std::vector<std::uint64_t> hashes_of(std::span<const std::byte> payload, std::span<std::byte> copy,
                                     std::size_t chunk_bytes, bool parallel) {
  const std::size_t count = chunk_count(payload.size(), chunk_bytes);
  std::vector<std::uint64_t> hashes(count);
  const auto hash_chunks = [&](std::size_t from, std::size_t to) noexcept {
    for (std::size_t i = from; i < to; ++i) {
      const std::size_t at = i * chunk_bytes, n = std::min(chunk_bytes, payload.size() - at);
      hashes[i] = copy.data() != nullptr ? copy_and_hash(payload.subspan(at, n), copy.data() + at)
                                         : payload_hash(payload.subspan(at, n));
    }
  };
  // Nothing leaves before every chunk is hashed (each header carries the total hash), so a large
  // payload is hashed by two threads, each half the chunks.
  std::thread helper;
  std::size_t mine = count;
  if (parallel && payload.size() >= kTwoThreadBytes && count >= 2 && std::thread::hardware_concurrency() > 1) {
    try {
      helper = std::thread(hash_chunks, count / 2, count);
      mine = count / 2;
    } catch (const std::system_error&) {
      // no thread to be had: this one hashes them all
    }
  }
  hash_chunks(0, mine);
  if (helper.joinable()) helper.join();
  return hashes;
}

// The frames of `viewed` (the payload, or its copy), whose chunks have these hashes.
std::vector<Frame> frames_of(std::uint64_t transfer_id, std::uint16_t tag, std::span<const std::byte> viewed,
                             std::size_t chunk_bytes, std::span<const std::uint64_t> hashes) {
  const std::size_t count = chunk_count(viewed.size(), chunk_bytes);
  MERIDIAN_CHECK(hashes.size() == count, hashes.size(), " chunk hashes for ", count, " chunks");
  ChunkHeader h;
  h.transfer_id = transfer_id;
  h.tag = tag;
  h.count = static_cast<std::uint32_t>(count);
  h.total_bytes = viewed.size();
  h.total_hash = total_hash_of(hashes);
  std::vector<Frame> frames;
  frames.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const auto part = viewed.subspan(i * chunk_bytes, std::min(chunk_bytes, viewed.size() - i * chunk_bytes));
    h.index = static_cast<std::uint32_t>(i);
    h.offset = i * chunk_bytes;
    h.length = static_cast<std::uint32_t>(part.size());
    h.payload_hash = hashes[i];
    frames.push_back({encode_chunk_header(h), part});
  }
  return frames;
}

}  // namespace

ChunkHashes chunk_hashes(std::span<const std::byte> payload, std::size_t chunk_bytes, bool parallel) {
  return {chunk_bytes, hashes_of(payload, {}, chunk_bytes, parallel)};
}

std::vector<Frame> make_frames(std::uint64_t transfer_id, std::uint16_t tag, std::span<const std::byte> payload,
                               std::size_t chunk_bytes, bool parallel) {
  return frames_of(transfer_id, tag, payload, chunk_bytes, hashes_of(payload, {}, chunk_bytes, parallel));
}

std::vector<Frame> hashed_frames(std::uint64_t transfer_id, std::uint16_t tag, std::span<const std::byte> payload,
                                 const ChunkHashes& hashes) {
  return frames_of(transfer_id, tag, payload, hashes.chunk_bytes, hashes.hashes);
}

std::vector<Frame> copy_frames(std::uint64_t transfer_id, std::uint16_t tag, std::span<const std::byte> payload,
                               std::span<std::byte> copy, std::size_t chunk_bytes) {
  MERIDIAN_CHECK(copy.size() == payload.size() && (copy.data() != nullptr || payload.empty()),
                 "a copy of ", copy.size(), " bytes for a payload of ", payload.size());
  if (payload.empty()) return make_frames(transfer_id, tag, payload, chunk_bytes);
  return frames_of(transfer_id, tag, copy, chunk_bytes, hashes_of(payload, copy, chunk_bytes, true));
}

}  // namespace meridian
