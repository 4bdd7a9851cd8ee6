#pragma once
// The receiving half of the framing of large payloads (chunker.hpp): collects the chunks of one
// transfer in any order, refuses anything that is not a well-formed, checksummed chunk of that
// transfer, and hands out the payload only when all of it is there and its whole hash matches.
//
// Assembled in place: the first accepted chunk reserves the whole payload (total_bytes, which the
// caller bounds: reserved()), and each chunk that continues it is copied straight to its end,
// hashed piece by piece as it is copied; one that fails its hash is cut off again. A chunk that
// arrives ahead of the ones before it is held in a buffer of its own until they are in. take()
// copies nothing.
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

  // The first accepted chunk fixes the transfer id, tag, chunk count, total size and whole hash;
  // chunks that disagree with them, or with the chunks accepted so far, are Rejected. Never throws
  // for what a peer sent.
  Result add(std::span<const std::byte> header, std::span<const std::byte> payload);
  bool complete() const;
  // Indices not yet accepted; empty before the first chunk (the count is not known yet).
  std::vector<std::uint32_t> missing() const;
  // The whole payload once complete and its hash matches; Error(Peer) otherwise. Once only.
  std::vector<std::byte> take();
  const Counts& counts() const { return counts_; }
  // Bytes reserved for the payload: 0 before the first accepted chunk, then its total_bytes. A
  // receiver holding several transfers bounds their sum (a peer declares total_bytes).
  std::uint64_t reserved() const { return first_ ? first_->total_bytes : 0; }

 private:
  struct Chunk {
    std::uint64_t offset;
    std::uint32_t length;
    std::uint64_t payload_hash;
    std::vector<std::byte> held;  // its bytes while it waits for the chunks before it; empty once in out_
  };
  Result reject(std::string reason, std::optional<std::uint32_t> rerequest = std::nullopt);
  // Why h cannot be a chunk of this transfer as known so far; empty when it can.
  std::string inconsistency(const ChunkHeader& h) const;
  std::span<const std::byte> bytes_of(const Chunk& c) const;
  // Moves the held chunks that now continue out_ (after chunk `after`) into it.
  void append_held(std::uint32_t after);

  std::optional<ChunkHeader> first_;   // the fields every chunk must share
  std::map<std::uint32_t, Chunk> chunks_;  // by index; offsets ascend with it
  std::uint64_t received_bytes_ = 0;
  std::vector<std::byte> out_;  // the payload from offset 0 as far as it is contiguous; capacity total_bytes
  bool taken_ = false;
  Counts counts_;
};

}  // namespace meridian
