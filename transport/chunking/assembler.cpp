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

std::string Assembler::layout_misfit(std::uint64_t transfer_id, std::uint32_t index, std::uint32_t count,
                                     std::uint64_t total_bytes, std::uint64_t offset, std::uint32_t length) const {
  // Checked against each other before anything is stored: the totals come from the peer.
  if (total_bytes > kMaxTransferBytes) return detail::concat("total_bytes ", total_bytes, " exceeds the limit");
  if (count == 0 || count > kMaxChunks) return detail::concat("count ", count, " out of range");
  if (count > std::max<std::uint64_t>(total_bytes, 1))
    return detail::concat("count ", count, " exceeds total_bytes ", total_bytes);
  if (index >= count) return detail::concat("index ", index, " out of range for count ", count);
  if (length > kMaxChunkBytes) return detail::concat("length ", length, " exceeds the chunk limit");
  if (length == 0 && total_bytes != 0) return "length 0 in a non-empty transfer";
  if (offset > total_bytes || length > total_bytes - offset)
    return detail::concat("offset ", offset, " + length ", length, " beyond total_bytes ", total_bytes);
  if (layout_) {
    if (transfer_id != layout_->transfer_id)
      return detail::concat("transfer_id ", transfer_id, " is not ", layout_->transfer_id);
    if (count != layout_->count) return detail::concat("count ", count, " is not ", layout_->count);
    if (total_bytes != layout_->total_bytes)
      return detail::concat("total_bytes ", total_bytes, " is not ", layout_->total_bytes);
  }
  return {};
}

std::variant<ChunkHeader, Assembler::Result> Assembler::read_header(std::span<const std::byte> header) {
  ChunkHeader h;
  try {
    h = decode_chunk_header(header);
  } catch (const Error& e) {
    return reject(e.what());
  }
  if (auto why = inconsistency(h); !why.empty()) return reject(std::move(why));
  return h;
}

std::string Assembler::inconsistency(const ChunkHeader& h) const {
  if (auto why = layout_misfit(h.transfer_id, h.index, h.count, h.total_bytes, h.offset, h.length); !why.empty())
    return why;
  if (first_) {
    if (h.tag != first_->tag) return detail::concat("tag ", h.tag, " is not ", first_->tag);
    if (h.total_hash != first_->total_hash) return "total_hash differs from the first chunk's";
  }
  return {};
}

std::string Assembler::misfit(std::uint32_t index, std::uint64_t offset, std::uint32_t length) const {
  // Offsets ascend with indices and placed chunks never overlap, so that once all are in, they
  // tile [0, total_bytes) exactly. (layout_misfit checked the chunk against the totals first.)
  const auto next = chunks_.upper_bound(index);
  if (next != chunks_.end() && offset + length > next->second.offset)
    return detail::concat("chunk ", index, " overlaps or follows chunk ", next->first);
  if (next != chunks_.begin()) {
    const auto prev = std::prev(next);
    if (prev->second.offset + prev->second.length > offset)
      return detail::concat("chunk ", index, " overlaps or precedes chunk ", prev->first);
  }
  return {};
}

std::optional<Assembler::Place> Assembler::take_place(std::uint64_t transfer_id, std::uint32_t index,
                                                      std::uint32_t count, std::uint64_t total_bytes,
                                                      std::uint64_t offset, std::uint32_t length,
                                                      std::optional<std::uint64_t> payload_hash) {
  // The lengths must still be able to tile the total with the chunks left.
  const std::uint64_t bytes_left = total_bytes - placed_bytes_ - length;
  const std::uint64_t chunks_left = count - chunks_.size() - 1;
  if (placed_bytes_ + length > total_bytes || (chunks_left == 0 ? bytes_left != 0 : bytes_left < chunks_left))
    return std::nullopt;
  if (!layout_) {
    try {
      out_.reserve(total_bytes);  // not written: only the chunks landing in it touch it
    } catch (const std::bad_alloc&) {
      return std::nullopt;
    }
    layout_ = Layout{transfer_id, count, total_bytes};
  }
  chunks_.emplace(index, Chunk{offset, length, payload_hash, std::nullopt});
  placed_bytes_ += length;
  return Place{index, {out_.data() + offset, length}};
}

void Assembler::note_header(const ChunkHeader& h) {
  if (!first_) first_ = h;
}

Assembler::Result Assembler::check(std::map<std::uint32_t, Chunk>::iterator it, std::uint64_t hash) {
  Chunk& c = it->second;
  if (hash != *c.payload_hash) {
    const std::uint32_t index = it->first;
    placed_bytes_ -= c.length;
    chunks_.erase(it);
    return reject(detail::concat("chunk ", index, " fails its payload checksum"), index);
  }
  c.accepted = true;
  c.landed_hash.reset();
  ++accepted_chunks_;
  ++counts_.accepted;
  grow();
  return {Verdict::Accepted, {}, std::nullopt};
}

std::optional<Assembler::Place> Assembler::claim(const ChunkHeader& h, std::size_t length) {
  MERIDIAN_CHECK(!taken_, "chunk claimed after take()");
  if (h.length == 0 || length != h.length || !inconsistency(h).empty() || chunks_.count(h.index) > 0 ||
      !misfit(h.index, h.offset, h.length).empty())
    return std::nullopt;
  auto place = take_place(h.transfer_id, h.index, h.count, h.total_bytes, h.offset, h.length, h.payload_hash);
  if (place) note_header(h);
  return place;
}

std::optional<Assembler::Place> Assembler::claim(const Placement& p, std::size_t length) {
  MERIDIAN_CHECK(!taken_, "chunk claimed after take()");
  if (p.length == 0 || length != p.length ||
      !layout_misfit(p.transfer_id, p.index, p.count, p.total_bytes, p.offset, p.length).empty() ||
      chunks_.count(p.index) > 0 || !misfit(p.index, p.offset, p.length).empty())
    return std::nullopt;
  return take_place(p.transfer_id, p.index, p.count, p.total_bytes, p.offset, p.length, std::nullopt);
}

Assembler::Result Assembler::settle(std::uint32_t index, std::uint64_t hash) {
  const auto it = chunks_.find(index);
  MERIDIAN_CHECK(it != chunks_.end() && it->second.writing(), "chunk ", index, " settled but not claimed");
  if (!it->second.payload_hash) {
    it->second.landed_hash = hash;
    return {Verdict::Pending, {}, std::nullopt};
  }
  return check(it, hash);
}

void Assembler::release(std::uint32_t index) {
  const auto it = chunks_.find(index);
  MERIDIAN_CHECK(it != chunks_.end() && it->second.writing(), "chunk ", index, " released but not claimed");
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
  auto read = read_header(header);
  if (auto* refused = std::get_if<Result>(&read)) return std::move(*refused);
  const ChunkHeader& h = std::get<ChunkHeader>(read);
  // From here on the header is authentic (it passed its own hash), so its index is worth re-requesting.
  if (payload.size() != h.length)
    return reject(detail::concat("chunk ", h.index, " carries ", payload.size(), " bytes, header says ", h.length),
                  h.index);

  if (auto it = chunks_.find(h.index); it != chunks_.end()) {
    if (payload_hash(payload) != h.payload_hash)
      return reject(detail::concat("chunk ", h.index, " fails its payload checksum"), h.index);
    Chunk& c = it->second;
    const bool pending = !c.accepted && c.landed_hash && !c.payload_hash;
    if (pending && (c.offset != h.offset || c.length != h.length)) {
      placed_bytes_ -= c.length;  // what came ahead went to the wrong place: this frame takes it
      chunks_.erase(it);
    } else {
      if (c.offset != h.offset || c.length != h.length || (c.payload_hash && *c.payload_hash != h.payload_hash))
        return reject(detail::concat("chunk ", h.index, " again with different bytes or offset"));
      if (c.accepted) {
        const std::span<const std::byte> bytes(out_.data() + c.offset, c.length);
        if (!std::equal(payload.begin(), payload.end(), bytes.begin(), bytes.end()))
          return reject(detail::concat("chunk ", h.index, " again with different bytes"));
        ++counts_.duplicates;
        return {Verdict::Duplicate, "chunk already accepted", std::nullopt};
      }
      note_header(h);
      c.payload_hash = h.payload_hash;
      if (c.writing()) {
        // Not there yet to compare with: this copy is dropped, and the bytes being written are
        // checked against its header when they land (and asked for again should they fail).
        ++counts_.duplicates;
        return {Verdict::Duplicate, "chunk being received", std::nullopt};
      }
      // Its payload came ahead and waits for this header: right, or replaced by this frame's.
      const std::uint64_t landed = *c.landed_hash;
      return check(it, landed == h.payload_hash ? landed : copy_and_hash(payload, out_.data() + c.offset));
    }
  }
  if (auto why = misfit(h.index, h.offset, h.length); !why.empty()) return reject(std::move(why));
  const auto place = take_place(h.transfer_id, h.index, h.count, h.total_bytes, h.offset, h.length, h.payload_hash);
  if (!place)
    return reject(detail::concat("chunk ", h.index, "'s length ", h.length, " does not fit the ", h.count,
                                 " chunks into total_bytes ", h.total_bytes, ", or no memory for them"));
  note_header(h);
  // Copied to its place and hashed on the way, in pieces that are hashed while in cache.
  return settle(h.index, copy_and_hash(payload, place->bytes.data()));
}

Assembler::Result Assembler::add(const Placement& p, std::span<const std::byte> payload) {
  MERIDIAN_CHECK(!taken_, "chunk added after take()");
  // Nothing authenticates a placement: what does not fit is refused, and its header, when it
  // comes, finds the chunk missing and has it asked for again.
  if (payload.size() != p.length)
    return reject(detail::concat("chunk ", p.index, " sent ahead carries ", payload.size(), " bytes, not ", p.length));
  if (auto why = layout_misfit(p.transfer_id, p.index, p.count, p.total_bytes, p.offset, p.length); !why.empty())
    return reject(std::move(why));
  if (chunks_.count(p.index) > 0) {
    ++counts_.duplicates;
    return {Verdict::Duplicate, "chunk placed already", std::nullopt};
  }
  if (auto why = misfit(p.index, p.offset, p.length); !why.empty()) return reject(std::move(why));
  const auto place = take_place(p.transfer_id, p.index, p.count, p.total_bytes, p.offset, p.length, std::nullopt);
  if (!place) return reject(detail::concat("chunk ", p.index, " sent ahead does not fit"));
  return settle(p.index, copy_and_hash(payload, place->bytes.data()));
}

Assembler::Result Assembler::confirm(std::span<const std::byte> header) {
  MERIDIAN_CHECK(!taken_, "chunk confirmed after take()");
  auto read = read_header(header);
  if (auto* refused = std::get_if<Result>(&read)) return std::move(*refused);
  const ChunkHeader& h = std::get<ChunkHeader>(read);
  const auto it = chunks_.find(h.index);
  if (it == chunks_.end())
    return {Verdict::Missing, detail::concat("no payload came for chunk ", h.index), h.index};
  Chunk& c = it->second;
  if (c.accepted || c.payload_hash) {
    if (c.offset == h.offset && c.length == h.length && c.payload_hash == h.payload_hash) {
      ++counts_.duplicates;
      return {Verdict::Duplicate, "chunk's header came already", std::nullopt};
    }
    return reject(detail::concat("chunk ", h.index, " again with different bytes or offset"));
  }
  if (c.offset != h.offset || c.length != h.length) {
    if (c.writing()) return reject(detail::concat("chunk ", h.index, "'s payload is being written to another place"));
    placed_bytes_ -= c.length;  // it came ahead to the wrong place
    chunks_.erase(it);
    return reject(detail::concat("chunk ", h.index, "'s payload came ahead to another place"), h.index);
  }
  note_header(h);
  c.payload_hash = h.payload_hash;
  if (c.writing()) return {Verdict::Pending, {}, std::nullopt};
  return check(it, *c.landed_hash);
}

bool Assembler::complete() const { return layout_ && accepted_chunks_ == layout_->count; }

std::vector<std::uint32_t> Assembler::missing() const {
  std::vector<std::uint32_t> out;
  if (!layout_) return out;
  auto placed = chunks_.begin();
  for (std::uint32_t i = 0; i < layout_->count; ++i) {
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
                     layout_ ? std::to_string(layout_->count) : std::string("?"), " chunks received");
  taken_ = true;
  // Complete chunks tile [0, total_bytes), so out_ has grown over all of them; each was accepted
  // against a header, so the first header is known.
  MERIDIAN_CHECK(out_.size() == layout_->total_bytes && first_, "assembled ", out_.size(), " of ",
                 layout_->total_bytes, " bytes");
  std::vector<std::uint64_t> hashes;
  hashes.reserve(chunks_.size());
  for (const auto& [index, chunk] : chunks_) hashes.push_back(*chunk.payload_hash);
  chunks_.clear();
  if (total_hash_of(hashes) != first_->total_hash)
    throw make_error(ErrorKind::Peer, "transfer ", layout_->transfer_id,
                     ": reassembled payload fails its whole-payload checksum");
  return std::move(out_);
}

}  // namespace meridian
