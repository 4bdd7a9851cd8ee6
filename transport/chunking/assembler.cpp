#include "transport/chunking/assembler.hpp"

#include <algorithm>
#include <iterator>
#include <new>

#include "core/util/error.hpp"
#include "core/util/hash.hpp"

namespace meridian {

Assembler::Result Assembler::reject(std::string reason, std::optional<std::uint32_t> rerequest) {
  ++counts_.rejected;
  return {Verdict::Rejected, std::move(reason), rerequest};
}

std::string Assembler::inconsistency(const ChunkHeader& h) const {
  // Checked against each other before anything is stored: the totals come from the peer.
  if (h.total_bytes > kMaxTransferBytes) return detail::concat("total_bytes ", h.total_bytes, " exceeds the limit");
  if (h.count == 0 || h.count > kMaxChunks) return detail::concat("count ", h.count, " out of range");
  if (h.count > std::max<std::uint64_t>(h.total_bytes, 1))
    return detail::concat("count ", h.count, " exceeds total_bytes ", h.total_bytes);
  if (h.index >= h.count) return detail::concat("index ", h.index, " out of range for count ", h.count);
  if (h.length > kMaxChunkBytes) return detail::concat("length ", h.length, " exceeds the chunk limit");
  if (h.length == 0 && h.total_bytes != 0) return "length 0 in a non-empty transfer";
  if (h.offset > h.total_bytes || h.length > h.total_bytes - h.offset)
    return detail::concat("offset ", h.offset, " + length ", h.length, " beyond total_bytes ", h.total_bytes);
  if (first_) {
    if (h.transfer_id != first_->transfer_id)
      return detail::concat("transfer_id ", h.transfer_id, " is not ", first_->transfer_id);
    if (h.tag != first_->tag) return detail::concat("tag ", h.tag, " is not ", first_->tag);
    if (h.count != first_->count) return detail::concat("count ", h.count, " is not ", first_->count);
    if (h.total_bytes != first_->total_bytes)
      return detail::concat("total_bytes ", h.total_bytes, " is not ", first_->total_bytes);
    if (h.total_hash != first_->total_hash) return "total_hash differs from the first chunk's";
  }
  return {};
}

std::span<const std::byte> Assembler::bytes_of(const Chunk& c) const {
  if (!c.held.empty() || c.length == 0) return c.held;
  return std::span<const std::byte>(out_).subspan(c.offset, c.length);
}

Assembler::Result Assembler::add(std::span<const std::byte> header, std::span<const std::byte> payload) {
  MERIDIAN_CHECK(!taken_, "chunk added after take()");
  ChunkHeader h;
  try {
    h = decode_chunk_header(header);
  } catch (const Error& e) {
    return reject(e.what());
  }
  if (auto why = inconsistency(h); !why.empty()) return reject(std::move(why));
  // From here on the header is authentic (it passed its own hash), so its index is worth re-requesting.
  if (payload.size() != h.length)
    return reject(detail::concat("chunk ", h.index, " carries ", payload.size(), " bytes, header says ", h.length),
                  h.index);

  const auto next = chunks_.lower_bound(h.index);
  if (next != chunks_.end() && next->first == h.index) {
    if (hash64(payload) != h.payload_hash)
      return reject(detail::concat("chunk ", h.index, " fails its payload checksum"), h.index);
    const Chunk& held = next->second;
    const auto bytes = bytes_of(held);
    if (held.offset == h.offset && held.payload_hash == h.payload_hash &&
        std::equal(payload.begin(), payload.end(), bytes.begin(), bytes.end())) {
      ++counts_.duplicates;
      return {Verdict::Duplicate, "chunk already accepted", std::nullopt};
    }
    return reject(detail::concat("chunk ", h.index, " again with different bytes or offset"));
  }
  // Offsets ascend with indices and accepted chunks never overlap, so that once all are in, they
  // tile [0, total_bytes) exactly.
  if (next != chunks_.end() && h.offset + h.length > next->second.offset)
    return reject(detail::concat("chunk ", h.index, " overlaps or follows chunk ", next->first));
  if (next != chunks_.begin()) {
    const auto prev = std::prev(next);
    if (prev->second.offset + prev->second.length > h.offset)
      return reject(detail::concat("chunk ", h.index, " overlaps or precedes chunk ", prev->first));
  }
  const std::uint64_t bytes_left = h.total_bytes - received_bytes_ - h.length;
  const std::uint64_t chunks_left = h.count - chunks_.size() - 1;
  if (chunks_left == 0 ? bytes_left != 0 : bytes_left < chunks_left)
    return reject(detail::concat("chunk ", h.index, "'s length ", h.length, " does not fit the ", h.count,
                                 " chunks into total_bytes ", h.total_bytes));

  Chunk chunk{h.offset, h.length, h.payload_hash, {}};
  if (!first_) {
    try {
      out_.reserve(h.total_bytes);  // not value-initialised: only the chunks' copies touch it
    } catch (const std::bad_alloc&) {
      return reject(detail::concat("cannot reserve total_bytes ", h.total_bytes));
    }
  }
  if (h.offset == out_.size()) {
    // Continues the payload: copied to its place (within the capacity, so out_ never moves) and
    // hashed on the way; cut off again when the hash fails.
    const std::size_t at = out_.size();
    std::uint64_t hash;
    {
      Hasher64 hasher;
      constexpr std::size_t kPiece = std::size_t{64} << 10;
      for (std::size_t done = 0; done < payload.size(); done += kPiece) {
        const auto piece = payload.subspan(done, std::min(kPiece, payload.size() - done));
        out_.insert(out_.end(), piece.begin(), piece.end());
        hasher.update(out_.data() + at + done, piece.size());
      }
      hash = hasher.digest();
    }
    if (hash != h.payload_hash) {
      out_.resize(at);
      return reject(detail::concat("chunk ", h.index, " fails its payload checksum"), h.index);
    }
  } else {
    if (hash64(payload) != h.payload_hash)
      return reject(detail::concat("chunk ", h.index, " fails its payload checksum"), h.index);
    chunk.held.assign(payload.begin(), payload.end());
  }

  const bool appended = chunk.held.empty();
  if (!first_) first_ = h;
  chunks_.emplace(h.index, std::move(chunk));
  received_bytes_ += h.length;
  ++counts_.accepted;
  if (appended) append_held(h.index);
  return {Verdict::Accepted, {}, std::nullopt};
}

void Assembler::append_held(std::uint32_t after) {
  for (auto it = chunks_.upper_bound(after); it != chunks_.end() && it->second.offset == out_.size() &&
                                             !it->second.held.empty();
       ++it) {
    Chunk& c = it->second;
    out_.insert(out_.end(), c.held.begin(), c.held.end());
    c.held = {};
  }
}

bool Assembler::complete() const { return first_ && chunks_.size() == first_->count; }

std::vector<std::uint32_t> Assembler::missing() const {
  std::vector<std::uint32_t> out;
  if (!first_) return out;
  auto held = chunks_.begin();
  for (std::uint32_t i = 0; i < first_->count; ++i) {
    if (held != chunks_.end() && held->first == i)
      ++held;
    else
      out.push_back(i);
  }
  return out;
}

std::vector<std::byte> Assembler::take() {
  MERIDIAN_CHECK(!taken_, "take() called twice");
  if (!complete())
    throw make_error(ErrorKind::Peer, "transfer incomplete: ", chunks_.size(), " of ",
                     first_ ? std::to_string(first_->count) : std::string("?"), " chunks received");
  taken_ = true;
  // Complete chunks tile [0, total_bytes), so every held one has been appended.
  MERIDIAN_CHECK(out_.size() == first_->total_bytes, "assembled ", out_.size(), " of ", first_->total_bytes, " bytes");
  std::vector<std::uint64_t> hashes;
  hashes.reserve(chunks_.size());
  for (const auto& [index, chunk] : chunks_) hashes.push_back(chunk.payload_hash);
  chunks_.clear();
  if (total_hash_of(hashes) != first_->total_hash)
    throw make_error(ErrorKind::Peer, "transfer ", first_->transfer_id,
                     ": reassembled payload fails its whole-payload checksum");
  return std::move(out_);
}

}  // namespace meridian
