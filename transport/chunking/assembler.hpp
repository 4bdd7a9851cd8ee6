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
//
// A payload may also come ahead of its header (so that a sender can send it while it is still
// hashing the rest): a Placement, which nothing authenticates, says where it goes; its bytes are
// placed and hashed as above but wait, Pending, until confirm() brings the chunk's header, which
// accepts or refuses them.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "transport/chunking/chunker.hpp"

namespace meridian {

class Assembler {  // one per transfer being received
 public:
  // `buffer`: memory to assemble into (its capacity is reused when large enough; see BufferPool).
  explicit Assembler(std::vector<std::byte> buffer = {}) : out_(std::move(buffer)) { out_.clear(); }

  enum class Verdict {
    Accepted,
    Duplicate,
    Rejected,
    Pending,  // in place (or on its way there), waiting for its header or its bytes
    Missing,  // a header whose payload never came: ask the sender for the chunk (rerequest)
  };
  struct Result {
    Verdict verdict;
    std::string reason;                     // empty when Accepted or Pending
    std::optional<std::uint32_t> rerequest;  // the chunk to ask the sender again for, when known
  };
  struct Counts {
    std::uint64_t accepted = 0;
    std::uint64_t duplicates = 0;
    std::uint64_t rejected = 0;
  };

  // Where a payload sent ahead of its header goes, as the frame that carries it says.
  struct Placement {
    std::uint64_t transfer_id = 0;
    std::uint32_t index = 0;
    std::uint32_t count = 0;
    std::uint64_t total_bytes = 0;
    std::uint64_t offset = 0;
    std::uint32_t length = 0;
  };

  // The first chunk that takes its place fixes the transfer id, chunk count and total size, and the
  // first header (which passed its own checksum) the tag and whole hash; chunks that disagree with
  // them, or with the chunks placed so far, are Rejected. Never throws for what a peer sent. A
  // chunk whose payload came ahead of its header is accepted by a copy of the whole frame too.
  Result add(std::span<const std::byte> header, std::span<const std::byte> payload);
  // A payload sent ahead of its header, from a buffer of its own: copied to its place, Pending.
  Result add(const Placement& p, std::span<const std::byte> payload);
  // The header of a chunk whose payload was sent ahead of it: Accepted or Rejected (to be
  // re-requested) when the payload is in, Pending while it is being written, Missing when it never
  // came (or did not fit), Duplicate when the chunk is in already.
  Result confirm(std::span<const std::byte> header);

  // Where the `length` bytes of the chunk with header h (or with placement p, sent ahead of its
  // header) are to be written, reserved for them until settle() or release(); nullopt, with nothing
  // counted, when the chunk cannot take its place now (it does not fit the transfer, length is not
  // the header's, the chunk is already in or being written, an empty chunk, or no memory): such a
  // chunk is to come through add(), from a buffer of its own, which decides what it is.
  struct Place {
    std::uint32_t index;
    std::span<std::byte> bytes;
  };
  std::optional<Place> claim(const ChunkHeader& h, std::size_t length);
  std::optional<Place> claim(const Placement& p, std::size_t length);
  // The claimed chunk's bytes are in place and hash to `hash`: Accepted, or Rejected (to be
  // re-requested) with its place free again; Pending when its header has not come yet.
  Result settle(std::uint32_t index, std::uint64_t hash);
  // The claimed chunk's bytes never came: its place is free again.
  void release(std::uint32_t index);

  bool complete() const;
  // Indices not yet accepted (those being written or waiting for their header included); empty
  // before the first chunk (the count is not known yet).
  std::vector<std::uint32_t> missing() const;
  // The whole payload once complete and its hash matches; Error(Peer) otherwise. Once only.
  std::vector<std::byte> take();
  const Counts& counts() const { return counts_; }
  // Bytes reserved for the payload: 0 before the first chunk took its place, then its total_bytes.
  // A receiver holding several transfers bounds their sum (a peer declares total_bytes).
  std::uint64_t reserved() const { return layout_ ? layout_->total_bytes : 0; }
  // The first header that came (its transfer id and tag are every chunk's), once one has.
  const std::optional<ChunkHeader>& first_header() const { return first_; }

 private:
  struct Layout {
    std::uint64_t transfer_id;
    std::uint32_t count;
    std::uint64_t total_bytes;
  };
  struct Chunk {
    std::uint64_t offset;
    std::uint32_t length;
    std::optional<std::uint64_t> payload_hash;  // from its header, once that came
    std::optional<std::uint64_t> landed_hash;   // of its bytes in place, while they wait for the header
    bool accepted = false;
    bool writing() const { return !accepted && !landed_hash; }
  };
  Result reject(std::string reason, std::optional<std::uint32_t> rerequest = std::nullopt);
  // Why a chunk that says it is `index` of `count`, at offset with length, of a transfer
  // `transfer_id` of total_bytes cannot be one of this transfer as known so far; empty when it can.
  std::string layout_misfit(std::uint64_t transfer_id, std::uint32_t index, std::uint32_t count,
                            std::uint64_t total_bytes, std::uint64_t offset, std::uint32_t length) const;
  // The same for a header, whose tag and whole hash must also be the first header's.
  std::string inconsistency(const ChunkHeader& h) const;
  // A header decoded and consistent with this transfer, or the refusal of it (counted).
  std::variant<ChunkHeader, Result> read_header(std::span<const std::byte> header);
  // Why a chunk that is not in chunks_ cannot take its place beside those that are; empty when it can.
  std::string misfit(std::uint32_t index, std::uint64_t offset, std::uint32_t length) const;
  // Reserves the chunk's place (and the whole payload, for the first chunk); nullopt when memory is short.
  std::optional<Place> take_place(std::uint64_t transfer_id, std::uint32_t index, std::uint32_t count,
                                  std::uint64_t total_bytes, std::uint64_t offset, std::uint32_t length,
                                  std::optional<std::uint64_t> payload_hash);
  // Takes h as the first header when none came yet.
  void note_header(const ChunkHeader& h);
  // Accepts chunk `it` (its bytes are in place and match its header), or frees its place.
  Result check(std::map<std::uint32_t, Chunk>::iterator it, std::uint64_t hash);
  // Extends out_ over the accepted chunks that now continue it.
  void grow();

  std::optional<Layout> layout_;      // fixed by the first chunk that took its place
  std::optional<ChunkHeader> first_;  // the first header that came: tag and whole hash
  // Placed (accepted, waiting for their header, being written), by index; offsets ascend with it.
  std::map<std::uint32_t, Chunk> chunks_;
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
