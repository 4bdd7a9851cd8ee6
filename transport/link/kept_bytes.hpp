#pragma once
// What a link keeps of the transfers it sent, to answer re-requests (shared by zmq_link and
// ucx_link): each transfer's frames and what owns the bytes they view, either a copy of the
// caller's bytes (made in the same pass that hashes them, into memory that is not zeroed first) or
// the caller's own buffer, shared. The owner is also handed to the transport with each frame that
// is sent without a copy, so a transfer may leave this list before its frames have left the host.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/util/error.hpp"
#include "transport/chunking/chunker.hpp"

namespace meridian {

// The frames both links' wire formats share (zmq_link.cpp and ucx_link.cpp describe the rest): a
// chunk, and a re-request of one.
inline constexpr std::byte kChunkFrame{'D'};
inline constexpr std::byte kRerequestFrame{'R'};

// A re-request's body: "send me chunk `index` of your transfer `transfer_id` again", little-endian.
struct Rerequest {
  static constexpr std::size_t kBytes = 12;
  std::uint64_t transfer_id = 0;
  std::uint32_t index = 0;

  std::array<std::byte, kBytes> encode() const {
    std::array<std::byte, kBytes> body{};
    for (std::size_t i = 0; i < 8; ++i) body[i] = static_cast<std::byte>(transfer_id >> (8 * i));
    for (std::size_t i = 0; i < 4; ++i) body[8 + i] = static_cast<std::byte>(index >> (8 * i));
    return body;
  }
  // `body`: kBytes, as the links check before they decode.
  static Rerequest decode(std::span<const std::byte> body) {
    MERIDIAN_CHECK(body.size() == kBytes, "a re-request of ", body.size(), " bytes");
    Rerequest r;
    for (std::size_t i = 0; i < 8; ++i) r.transfer_id |= std::uint64_t(body[i]) << (8 * i);
    for (std::size_t i = 0; i < 4; ++i) r.index |= std::uint32_t(body[8 + i]) << (8 * i);
    return r;
  }
};

class KeptTransfers {
 public:
  struct Sent {
    std::string peer;
    std::uint64_t transfer_id;
    std::shared_ptr<const void> owner;  // owns what frames view
    std::size_t bytes;
    std::vector<Frame> frames;
  };

  // Sent transfers are kept to answer re-requests; a receiver asks within moments of the frame
  // arriving, so the last few transfers (bounded in bytes too) are enough.
  static constexpr std::size_t kMaxTransfers = 64;
  static constexpr std::size_t kMaxBytes = std::size_t{1} << 30;
  explicit KeptTransfers(std::size_t chunk_bytes) : chunk_bytes_(chunk_bytes) {}

  std::size_t chunk_bytes() const { return chunk_bytes_; }

  // Copies payload (the caller's buffer may be gone by the time of a re-request).
  const Sent& keep(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
                   std::span<const std::byte> payload) {
    std::shared_ptr<std::byte[]> copy(new std::byte[std::max<std::size_t>(payload.size(), 1)]);  // not zeroed
    auto frames = copy_frames(transfer_id, tag, payload, {copy.get(), payload.size()}, chunk_bytes_);
    return add(Sent{peer, transfer_id, std::move(copy), payload.size(), std::move(frames)});
  }

  // Shares payload, which nobody may change any more. parallel: see make_frames.
  const Sent& keep(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
                   std::shared_ptr<const std::vector<std::byte>> payload, bool parallel = true) {
    auto frames = make_frames(transfer_id, tag, *payload, chunk_bytes_, parallel);
    const std::size_t bytes = payload->size();
    return add(Sent{peer, transfer_id, std::move(payload), bytes, std::move(frames)});
  }

  // Shares payload, whose chunk hashes the caller took (ChunkHashes): reads none of its bytes.
  const Sent& keep(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
                   std::shared_ptr<const std::vector<std::byte>> payload, const ChunkHashes& hashes) {
    MERIDIAN_CHECK(hashes.chunk_bytes == chunk_bytes_, "hashes of ", hashes.chunk_bytes, "-byte chunks for a link of ",
                   chunk_bytes_);
    auto frames = hashed_frames(transfer_id, tag, *payload, hashes);
    const std::size_t bytes = payload->size();
    return add(Sent{peer, transfer_id, std::move(payload), bytes, std::move(frames)});
  }

  // The transfer a re-request asks for, when it holds that chunk. Only transfers sent to that very
  // peer are found: nobody else may pull them.
  const Sent* find(const std::string& peer, const Rerequest& asked) const {
    const auto it = std::find_if(sent_.begin(), sent_.end(),
                                 [&](const Sent& s) { return s.peer == peer && s.transfer_id == asked.transfer_id; });
    return it == sent_.end() || asked.index >= it->frames.size() ? nullptr : &*it;
  }

 private:
  const Sent& add(Sent sent) {
    // A re-sent id replaces the old frames: a re-request can only mean the newest.
    std::erase_if(sent_, [&](const Sent& s) {
      if (s.peer != sent.peer || s.transfer_id != sent.transfer_id) return false;
      bytes_ -= s.bytes;
      return true;
    });
    bytes_ += sent.bytes;
    sent_.push_back(std::move(sent));
    while (sent_.size() > kMaxTransfers || (sent_.size() > 1 && bytes_ > kMaxBytes)) {
      bytes_ -= sent_.front().bytes;
      sent_.pop_front();
    }
    return sent_.back();
  }

  std::size_t chunk_bytes_;
  std::deque<Sent> sent_;
  std::size_t bytes_ = 0;
};

}  // namespace meridian
