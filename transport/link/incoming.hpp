#pragma once
// The receiving half every Link shares (zmq_link, ucx_link): the transfers being assembled (one
// Assembler each, bounded in count and in bytes reserved, the oldest giving way), the transfers
// already delivered (so late duplicates of their chunks are not taken for new ones), and the
// buffers handed back for reuse. Links only move frames; this decides what a frame means.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/util/error.hpp"
#include "transport/chunking/assembler.hpp"
#include "transport/link/buffer_pool.hpp"
#include "transport/link/link.hpp"

namespace meridian {

class IncomingTransfers {
 public:
  struct Outcome {
    std::optional<Received> delivered;      // the transfer this chunk completed
    std::optional<std::uint32_t> rerequest;  // the chunk to ask `peer` for again
  };

  // One chunk frame from `peer`. Counts refusals and duplicates in `counters`; never throws for
  // what a peer sent.
  Outcome add(const std::string& peer, std::span<const std::byte> header, std::span<const std::byte> payload,
              Link::Counters& counters) {
    Outcome out;
    ChunkHeader h;
    try {
      h = decode_chunk_header(header);
    } catch (const Error&) {
      ++counters.rejected;  // nothing in it can be trusted, not even which chunk to ask for again
      return out;
    }
    const Key key{peer, h.transfer_id};
    if (delivered_.count(key) > 0) {
      ++counters.duplicates;
      return out;
    }
    auto it = open_.find(key);
    if (it == open_.end()) {
      if (open_.size() >= kMaxOpenTransfers) drop_open(open_order_.front());
      it = open_.emplace(key, Assembler{pool_.take()}).first;
      open_order_.push_back(key);
    }
    Assembler& assembler = it->second;
    // Its first chunk makes the assembler reserve total_bytes (when it is accepted): the oldest
    // partial transfers make room. More than the bound is refused by the assembler itself.
    const std::uint64_t reserved = assembler.reserved();
    if (reserved == 0 && h.total_bytes <= kMaxOpenBytes)
      while (open_bytes_ + h.total_bytes > kMaxOpenBytes)  // others hold open_bytes_: this one holds none
        drop_open(*std::find_if(open_order_.begin(), open_order_.end(), [&](const Key& k) { return k != key; }));
    const Assembler::Result result = assembler.add(header, payload);
    open_bytes_ += assembler.reserved() - reserved;
    if (result.verdict == Assembler::Verdict::Duplicate) ++counters.duplicates;
    if (result.verdict == Assembler::Verdict::Rejected) {
      ++counters.rejected;
      out.rerequest = result.rerequest;
    }
    if (result.verdict != Assembler::Verdict::Accepted || !assembler.complete()) return out;
    std::optional<std::vector<std::byte>> bytes;
    try {
      bytes = assembler.take();
    } catch (const Error&) {
      ++counters.rejected;  // every chunk checked out but the whole did not: the sender is broken
    }
    drop_open(key);
    remember(key);
    if (bytes) out.delivered = Received{peer, h.transfer_id, h.tag, std::move(*bytes)};
    return out;
  }

  void recycle(std::vector<std::byte> bytes) { pool_.put(std::move(bytes)); }

 private:
  using Key = std::pair<std::string, std::uint64_t>;  // (peer, transfer id)
  // Delivered transfers remembered so that late duplicates of their chunks are not taken for a
  // new transfer; partial transfers held at once, so that a peer cannot make us hold unbounded state.
  static constexpr std::size_t kRememberedTransfers = 4096;
  static constexpr std::size_t kMaxOpenTransfers = 256;
  static constexpr std::uint64_t kMaxOpenBytes = kMaxTransferBytes;

  void drop_open(Key key) {  // a copy: key may be an element of open_order_
    const auto it = open_.find(key);
    open_bytes_ -= it->second.reserved();
    open_.erase(it);
    std::erase(open_order_, key);
  }

  void remember(const Key& key) {
    delivered_.insert(key);
    delivered_order_.push_back(key);
    if (delivered_order_.size() > kRememberedTransfers) {
      delivered_.erase(delivered_order_.front());
      delivered_order_.pop_front();
    }
  }

  std::map<Key, Assembler> open_;
  BufferPool pool_;
  std::uint64_t open_bytes_ = 0;  // reserved by open_
  std::deque<Key> open_order_;
  std::set<Key> delivered_;
  std::deque<Key> delivered_order_;
};

}  // namespace meridian
