#pragma once
// The sending half of the framing of large payloads between sites (see assembler.hpp for the
// receiving half): a payload becomes ordered chunks, each an encoded wire::ChunkHeader plus a view
// of its bytes. Links (ZeroMQ, UCX) move the two parts; this layer does not care how.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace meridian {

// Links may hold a chunk in one buffer; a Cap'n Proto Data field must stay below 2^29 bytes.
inline constexpr std::size_t kMaxChunkBytes = std::size_t{256} << 20;
inline constexpr std::size_t kDefaultChunkBytes = std::size_t{4} << 20;
// Bounds what a receiver may be made to hold for one transfer, and what missing() may list.
inline constexpr std::uint64_t kMaxTransferBytes = std::uint64_t{64} << 30;
inline constexpr std::uint32_t kMaxChunks = std::uint32_t{1} << 20;

// The fields of a wire::ChunkHeader (transport/schemas/chunk.capnp), less its header hash, which
// encoding computes and decoding checks.
struct ChunkHeader {
  std::uint64_t transfer_id = 0;
  std::uint16_t tag = 0;
  std::uint32_t index = 0;
  std::uint32_t count = 0;
  std::uint64_t total_bytes = 0;
  std::uint64_t offset = 0;
  std::uint32_t length = 0;
  std::uint64_t payload_hash = 0;
  std::uint64_t total_hash = 0;
};

std::vector<std::byte> encode_chunk_header(const ChunkHeader& h);
// Error(Peer) when bytes are not a header of this schema version or fail the header hash; says
// nothing about whether the fields make sense together (the Assembler's job).
ChunkHeader decode_chunk_header(std::span<const std::byte> bytes);

struct Frame {
  std::vector<std::byte> header;       // an encoded wire::ChunkHeader
  std::span<const std::byte> payload;  // a view into the payload given to make_frames
};

// The wire::ChunkHeader totalHash of a payload whose chunks have these payload hashes, in index order.
std::uint64_t total_hash_of(std::span<const std::uint64_t> chunk_hashes);

// The payload_hash of each chunk of a payload cut into chunks of chunk_bytes, in index order: what a
// Link puts in the chunk headers. A producer that takes them where its bytes are made (the delta
// encoder) hands them to the link (Link::send with ChunkHashes), which then sends without reading
// the payload; the receiver checks every chunk against its header all the same.
struct ChunkHashes {
  std::size_t chunk_bytes = kDefaultChunkBytes;
  std::vector<std::uint64_t> hashes;
  bool operator==(const ChunkHashes&) const = default;
};
// Reads payload once, with two threads from 16 MiB on when `parallel`. 0 < chunk_bytes <= kMaxChunkBytes.
ChunkHashes chunk_hashes(std::span<const std::byte> payload, std::size_t chunk_bytes = kDefaultChunkBytes,
                         bool parallel = true);

// Splits payload into chunks of at most chunk_bytes (0 < chunk_bytes <= kMaxChunkBytes), in order;
// an empty payload still yields one (empty) chunk, so the receiver learns it is complete. The
// frames view payload, which must outlive them. Reads payload once (the chunks' hashes), with two
// threads from 16 MiB on when `parallel` (no frame can leave before all are hashed: every header
// carries the total hash); with one when the caller has other work for the other core.
std::vector<Frame> make_frames(std::uint64_t transfer_id, std::uint16_t tag, std::span<const std::byte> payload,
                               std::size_t chunk_bytes = kDefaultChunkBytes, bool parallel = true);
// The same frames, from the chunk hashes of payload (hashes.chunk_bytes are the chunks' size): reads
// nothing of payload. A caller bug (MERIDIAN_CHECK) when there are not as many hashes as chunks.
std::vector<Frame> hashed_frames(std::uint64_t transfer_id, std::uint16_t tag, std::span<const std::byte> payload,
                                 const ChunkHashes& hashes);
// The same frames, for a payload copied into `copy` (of payload's size) on the way: one pass that
// copies and hashes each piece while it is in cache. The frames view copy.
std::vector<Frame> copy_frames(std::uint64_t transfer_id, std::uint16_t tag, std::span<const std::byte> payload,
                               std::span<std::byte> copy, std::size_t chunk_bytes = kDefaultChunkBytes);

// A chunk's payload_hash: XXH3-64 (hash64 with seed 0), computed with the widest vector unit the
// CPU has (a chunk is hashed once by its sender and once by its receiver, both on the path of the
// transfer).
std::uint64_t payload_hash(std::span<const std::byte> bytes);
// payload_hash of `from`, copied into `to` (of the same size) in the same pass.
std::uint64_t copy_and_hash(std::span<const std::byte> from, std::byte* to);

}  // namespace meridian
