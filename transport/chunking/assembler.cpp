#include "transport/chunking/assembler.hpp"

#include <algorithm>
#include <iterator>
#include <new>

#include "core/util/error.hpp"

namespace meridian {
namespace {

// Makes the n bytes that lie just past v's end, within its capacity (a chunk copied or received
// there), part of v without writing them again: the insert copies that range onto itself, which
// glibc's memmove returns from at once (were it to copy, the bytes would still be the same).
// std::vector offers no other way to grow over bytes already there; resize() would zero them.
void grow_over(std::vector<std::byte>& v, std::size_t n) {
  std::byte* const end = v.data() + v.size();
  v.insert(v.end(), end, end + n);
}

}  // namespace

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

std::string Assembler::misfit(const ChunkHeader& h) const {
  // Offsets ascend with indices and placed chunks never overlap, so that once all are in, they
  // tile [0, total_bytes) exactly.
  const auto next = chunks_.upper_bound(h.index);
  if (next != chunks_.end() && h.offset + h.length > next->second.offset)
    return detail::concat("chunk ", h.index, " overlaps or follows chunk ", next->first);
  if (next != chunks_.begin()) {
    const auto prev = std::prev(next);
    if (prev->second.offset + prev->second.length > h.offset)
      return detail::concat("chunk ", h.index, " overlaps or precedes chunk ", prev->first);
  }
  const std::uint64_t bytes_left = h.total_bytes - placed_bytes_ - h.length;
  const std::uint64_t chunks_left = h.count - chunks_.size() - 1;
  if (chunks_left == 0 ? bytes_left != 0 : bytes_left < chunks_left)
    return detail::concat("chunk ", h.index, "'s length ", h.length, " does not fit the ", h.count,
                          " chunks into total_bytes ", h.total_bytes);
  return {};
}

std::optional<Assembler::Place> Assembler::take_place(const ChunkHeader& h) {
  if (!first_) {
    try {
      out_.reserve(h.total_bytes);  // not written: only the chunks landing in it touch it
    } catch (const std::bad_alloc&) {
      return std::nullopt;
    }
    first_ = h;
  }
  chunks_.emplace(h.index, Chunk{h.offset, h.length, h.payload_hash, false});
  placed_bytes_ += h.length;
  return Place{h.index, {out_.data() + h.offset, h.length}};
}

std::optional<Assembler::Place> Assembler::claim(const ChunkHeader& h, std::size_t length) {
  MERIDIAN_CHECK(!taken_, "chunk claimed after take()");
  if (h.length == 0 || length != h.length || !inconsistency(h).empty() || chunks_.count(h.index) > 0 ||
      !misfit(h).empty())
    return std::nullopt;
  return take_place(h);
}

Assembler::Result Assembler::settle(std::uint32_t index, std::uint64_t hash) {
  const auto it = chunks_.find(index);
  MERIDIAN_CHECK(it != chunks_.end() && !it->second.accepted, "chunk ", index, " settled but not claimed");
  Chunk& c = it->second;
  if (hash != c.payload_hash) {
    placed_bytes_ -= c.length;
    chunks_.erase(it);
    return reject(detail::concat("chunk ", index, " fails its payload checksum"), index);
  }
  c.accepted = true;
  ++accepted_chunks_;
  ++counts_.accepted;
  grow();
  return {Verdict::Accepted, {}, std::nullopt};
}

void Assembler::release(std::uint32_t index) {
  const auto it = chunks_.find(index);
  MERIDIAN_CHECK(it != chunks_.end() && !it->second.accepted, "chunk ", index, " released but not claimed");
  placed_bytes_ -= it->second.length;
  chunks_.erase(it);
}

void Assembler::grow() {
  for (auto it = chunks_.find(grown_chunks_);
       it != chunks_.end() && it->second.accepted && it->second.offset == out_.size();
       it = chunks_.find(++grown_chunks_))
    grow_over(out_, it->second.length);
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

  if (const auto it = chunks_.find(h.index); it != chunks_.end()) {
    if (payload_hash(payload) != h.payload_hash)
      return reject(detail::concat("chunk ", h.index, " fails its payload checksum"), h.index);
    const Chunk& c = it->second;
    if (c.offset != h.offset || c.payload_hash != h.payload_hash)
      return reject(detail::concat("chunk ", h.index, " again with different bytes or offset"));
    // One being written is not there to compare with: this copy is dropped, and should the one being
    // written fail its hash, the chunk is asked for again then.
    const std::span<const std::byte> bytes(out_.data() + c.offset, c.length);
    if (!c.accepted || std::equal(payload.begin(), payload.end(), bytes.begin(), bytes.end())) {
      ++counts_.duplicates;
      return {Verdict::Duplicate, c.accepted ? "chunk already accepted" : "chunk being received", std::nullopt};
    }
    return reject(detail::concat("chunk ", h.index, " again with different bytes"));
  }
  if (auto why = misfit(h); !why.empty()) return reject(std::move(why));
  const auto place = take_place(h);
  if (!place) return reject(detail::concat("cannot reserve total_bytes ", h.total_bytes));
  // Copied to its place and hashed on the way, in pieces that are hashed while in cache.
  return settle(h.index, copy_and_hash(payload, place->bytes.data()));
}

bool Assembler::complete() const { return first_ && accepted_chunks_ == first_->count; }

std::vector<std::uint32_t> Assembler::missing() const {
  std::vector<std::uint32_t> out;
  if (!first_) return out;
  auto placed = chunks_.begin();
  for (std::uint32_t i = 0; i < first_->count; ++i) {
    const bool in = placed != chunks_.end() && placed->first == i;
    if (!in || !placed->second.accepted) out.push_back(i);
    if (in) ++placed;
  }
  return out;
}

std::vector<std::byte> Assembler::take() {
  MERIDIAN_CHECK(!taken_, "take() called twice");
  if (!complete())
    throw make_error(ErrorKind::Peer, "transfer incomplete: ", accepted_chunks_, " of ",
                     first_ ? std::to_string(first_->count) : std::string("?"), " chunks received");
  taken_ = true;
  // Complete chunks tile [0, total_bytes), so out_ has grown over all of them.
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
