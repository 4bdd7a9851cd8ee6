#pragma once
// The receiving half of the framing of large payloads (chunker.hpp): collects the chunks of one
// transfer in any order, refuses anything that is not a well-formed, checksummed chunk of that
// transfer, and hands out the payload only when all of it is there and its whole hash matches.
//
// Assembled in place: the first chunk that takes its place reserves the whole payload (total_bytes,
// which the caller bounds: reserved()), and every chunk's bytes go straight to their offset in it,
// hashed there; one that fails its hash leaves its place free again. The reserved memory is only
// written where chunks land (a peer that declares a large total makes us touch only what it sends).
// take() copies nothing.
//
// A chunk's bytes get to their place in one of two ways: add() copies them from a frame (hashing
// each piece while it is in cache), or a transport writes them there itself: claim() hands out the
// place of a chunk whose header has arrived and whose payload is yet to come (a UCX rendezvous
// receive lands it there: no second copy), and settle() then checks what was written.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "transport/chunking/chunker.hpp"

namespace meridian {

class Assembler {  // one per transfer being received
 public:
  // `buffer`: memory to assemble into (its capacity is reused when large enough; see BufferPool).
  explicit Assembler(std::vector<std::byte> buffer = {}) : out_(std::move(buffer)) { out_.clear(); }

  enum class Verdict { Accepted, Duplicate, Rejected };
  struct Result {
    Verdict verdict;
    std::string reason;                     // empty when Accepted
    std::optional<std::uint32_t> rerequest;  // the chunk to ask the sender again for, when known
  };
  struct Counts {
    std::uint64_t accepted = 0;
    std::uint64_t duplicates = 0;
    std::uint64_t rejected = 0;
  };

  // The first chunk that takes its place fixes the transfer id, tag, chunk count, total size and
  // whole hash (its header passed its own checksum); chunks that disagree with them, or with the
  // chunks placed so far, are Rejected. Never throws for what a peer sent.
  Result add(std::span<const std::byte> header, std::span<const std::byte> payload);

  // Where the `length` bytes of the chunk with header h are to be written, reserved for them until
  // settle() or release(); nullopt, with nothing counted, when the chunk cannot take its place now
  // (its header does not fit the transfer, length is not the header's, the chunk is already in or
  // being written, an empty chunk, or no memory): such a chunk is to come through add(), from a
  // buffer of its own, which decides what it is.
  struct Place {
    std::uint32_t index;
    std::span<std::byte> bytes;
  };
  std::optional<Place> claim(const ChunkHeader& h, std::size_t length);
  // The claimed chunk's bytes are in place and hash to `hash`: Accepted, or Rejected (to be
  // re-requested) with its place free again.
  Result settle(std::uint32_t index, std::uint64_t hash);
  // The claimed chunk's bytes never came: its place is free again.
  void release(std::uint32_t index);

  bool complete() const;
  // Indices not yet accepted (those being written included); empty before the first chunk (the
  // count is not known yet).
  std::vector<std::uint32_t> missing() const;
  // The whole payload once complete and its hash matches; Error(Peer) otherwise. Once only.
  std::vector<std::byte> take();
  const Counts& counts() const { return counts_; }
  // Bytes reserved for the payload: 0 before the first chunk took its place, then its total_bytes.
  // A receiver holding several transfers bounds their sum (a peer declares total_bytes).
  std::uint64_t reserved() const { return first_ ? first_->total_bytes : 0; }

 private:
  struct Chunk {
    std::uint64_t offset;
    std::uint32_t length;
    std::uint64_t payload_hash;
    bool accepted;  // false while its bytes are being written (claimed)
  };
  Result reject(std::string reason, std::optional<std::uint32_t> rerequest = std::nullopt);
  // Why h cannot be a chunk of this transfer as known so far; empty when it can.
  std::string inconsistency(const ChunkHeader& h) const;
  // Why a chunk h that is not in chunks_ cannot take its place beside those that are; empty when it can.
  std::string misfit(const ChunkHeader& h) const;
  // Reserves h's place (and the whole payload, for the first chunk); nullopt when memory is short.
  std::optional<Place> take_place(const ChunkHeader& h);
  // Extends out_ over the accepted chunks that now continue it.
  void grow();

  std::optional<ChunkHeader> first_;   // the fields every chunk must share
  std::map<std::uint32_t, Chunk> chunks_;  // accepted and claimed, by index; offsets ascend with it
  std::uint64_t placed_bytes_ = 0;        // the lengths of chunks_
  std::uint32_t accepted_chunks_ = 0;
  std::uint32_t grown_chunks_ = 0;  // chunks [0, grown_chunks_) make up out_
  // The payload from offset 0 as far as it is contiguous and accepted; capacity total_bytes, and the
  // bytes of the chunks placed beyond its end lie at their offsets in that capacity.
  std::vector<std::byte> out_;
  bool taken_ = false;
  Counts counts_;
};

}  // namespace meridian
