#pragma once
// The receiving half of the framing of large payloads (chunker.hpp): collects the chunks of one
// transfer in any order, refuses anything that is not a well-formed, checksummed chunk of that
// transfer, and hands out the payload only when all of it is there and its whole hash matches.
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

 private:
  struct Chunk {
    std::uint64_t offset;
    std::uint64_t payload_hash;
    std::vector<std::byte> bytes;
  };
  Result reject(std::string reason, std::optional<std::uint32_t> rerequest = std::nullopt);
  // Why h cannot be a chunk of this transfer as known so far; empty when it can.
  std::string inconsistency(const ChunkHeader& h) const;

  std::optional<ChunkHeader> first_;   // the fields every chunk must share
  std::map<std::uint32_t, Chunk> chunks_;  // by index; offsets ascend with it
  std::uint64_t received_bytes_ = 0;
  bool taken_ = false;
  Counts counts_;
};

}  // namespace meridian
