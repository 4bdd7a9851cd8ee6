#pragma once
// The receiving half every Link shares (zmq_link, ucx_link): the transfers being assembled (one
// Assembler each, bounded in count and in bytes reserved, the oldest giving way), the transfers
// already delivered (so late duplicates of their chunks are not taken for new ones), and the
// buffers handed back for reuse. Links only move frames; this decides what a frame means.
//
// Chunks come in two ways. add() takes a chunk frame whose payload is in a buffer of its own and
// copies it to its place. place() lets a transport receive a chunk's payload straight into its
// place in the transfer being assembled: it is called with the frame's header before the payload
// has arrived (the UCX link's rendezvous receives, on UCX's progress thread) and hands out the
// place with a Claim on it; landed() then checks the bytes where they lie. So each byte of a
// large transfer is copied once, by the transport, and hashed once, by the link's thread, while
// the transport receives the next chunk. A payload may also come ahead of its chunk header, placed
// as its frame says (Assembler::Placement; the UCX link's 'P' frames), in place or in a buffer of
// its own: it is hashed as it lands and checked by confirm() with the header when that comes.
//
// Thread-safe: the link's thread and a transport's thread may call it at once.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
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
  struct Shared;
  struct Entry;

 public:
  struct Outcome {
    std::optional<Received> delivered;      // the transfer this chunk completed
    std::optional<std::uint32_t> rerequest;  // the chunk to ask `peer` for again
  };

  // A chunk's place in a transfer being assembled, reserved while its payload is being written
  // there. Hand it to landed() once the bytes are in; dropped before that (the receive failed), it
  // frees the place again. It keeps the memory alive even when the transfer gives way meanwhile.
  class Claim {
   public:
    Claim(const Claim&) = delete;
    Claim& operator=(const Claim&) = delete;
    ~Claim() {
      if (settled_) return;
      std::lock_guard lock(shared_->mutex);
      entry_->assembler.release(placement_.index);
    }
    std::span<std::byte> bytes() const { return bytes_; }
    const std::string& peer() const { return peer_; }
    std::uint64_t transfer_id() const { return placement_.transfer_id; }

   private:
    friend class IncomingTransfers;
    Claim(std::shared_ptr<Shared> shared, std::shared_ptr<Entry> entry, std::span<std::byte> bytes, std::string peer,
          std::span<const std::byte> header, const Assembler::Placement& placement)
        : shared_(std::move(shared)),
          entry_(std::move(entry)),
          bytes_(bytes),
          peer_(std::move(peer)),
          header_(header.begin(), header.end()),
          placement_(placement) {}
    std::shared_ptr<Shared> shared_;
    std::shared_ptr<Entry> entry_;
    std::span<std::byte> bytes_;
    std::string peer_;
    std::vector<std::byte> header_;  // the frame's chunk header, encoded; empty for a payload sent ahead of it
    Assembler::Placement placement_;
    bool settled_ = true;  // under shared_->mutex; false once handed out, true again once landed
  };

  IncomingTransfers() : shared_(std::make_shared<Shared>()) {}

  // One chunk frame from `peer`. Counts refusals and duplicates in `counters`; never throws for
  // what a peer sent.
  Outcome add(const std::string& peer, std::span<const std::byte> header, std::span<const std::byte> payload,
              Link::Counters& counters) {
    ChunkHeader h;
    try {
      h = decode_chunk_header(header);
    } catch (const Error&) {
      ++counters.rejected;  // nothing in it can be trusted, not even which chunk to ask for again
      return {};
    }
    return apply(peer, h.transfer_id, h.total_bytes, counters,
                 [&](Assembler& a) { return a.add(header, payload); });
  }

  // A chunk's payload sent ahead of its header (placed as `p` says), from a buffer of its own.
  Outcome add(const std::string& peer, const Assembler::Placement& p, std::span<const std::byte> payload,
              Link::Counters& counters) {
    return apply(peer, p.transfer_id, p.total_bytes, counters, [&](Assembler& a) { return a.add(p, payload); });
  }

  // The header of a chunk whose payload was sent ahead of it (Assembler::confirm): a payload that
  // never came is asked for again (the outcome's rerequest).
  Outcome confirm(const std::string& peer, std::span<const std::byte> header, Link::Counters& counters) {
    ChunkHeader h;
    try {
      h = decode_chunk_header(header);
    } catch (const Error&) {
      ++counters.rejected;
      return {};
    }
    return apply(peer, h.transfer_id, h.total_bytes, counters, [&](Assembler& a) { return a.confirm(header); });
  }

  // Where the `length` bytes of the chunk frame `header` from `peer` (or of a payload sent ahead of
  // its header, placed as `p` says) may be written, with the claim on that place; nullopt (nothing
  // counted) when the frame is to come through add() instead: not a chunk that can take its place
  // now (malformed, already delivered or in, being written, ...).
  struct Place {
    std::span<std::byte> bytes;
    std::shared_ptr<Claim> claim;
  };
  std::optional<Place> place(const std::string& peer, std::span<const std::byte> header, std::size_t length) {
    ChunkHeader h;
    try {
      h = decode_chunk_header(header);
    } catch (const Error&) {
      return std::nullopt;
    }
    const Assembler::Placement p{h.transfer_id, h.index, h.count, h.total_bytes, h.offset, h.length};
    return claim(peer, p, header, [&](Assembler& a) { return a.claim(h, length); });
  }
  std::optional<Place> place(const std::string& peer, const Assembler::Placement& p, std::size_t length) {
    return claim(peer, p, {}, [&](Assembler& a) { return a.claim(p, length); });
  }

  // The payload of a claimed chunk is in its place: it is hashed there (without holding up the
  // transport meanwhile) and then accepted or refused as add() would, or waits for its header; a
  // re-request goes to the claim's peer. A claim on a transfer that gave way meanwhile is taken as
  // a frame of its own.
  Outcome landed(const std::shared_ptr<Claim>& claim, Link::Counters& counters) {
    // Nobody else touches a claimed place, and the claim keeps it alive.
    const std::uint64_t hash = payload_hash(claim->bytes_);
    const Assembler::Placement& p = claim->placement_;
    const Key key{claim->peer_, p.transfer_id};
    {
      std::lock_guard lock(shared_->mutex);
      claim->settled_ = true;
      const auto it = open_.find(key);
      if (it != open_.end() && it->second == claim->entry_)
        return finish(key, it->second->assembler.settle(p.index, hash), counters);
      claim->entry_->assembler.release(p.index);
    }
    if (claim->header_.empty()) return add(claim->peer_, p, claim->bytes_, counters);
    return add(claim->peer_, claim->header_, claim->bytes_, counters);
  }

  void recycle(std::vector<std::byte> bytes) {
    std::lock_guard lock(shared_->mutex);
    pool_.put(std::move(bytes));
  }

 private:
  using Key = std::pair<std::string, std::uint64_t>;  // (peer, transfer id)
  // Delivered transfers remembered so that late duplicates of their chunks are not taken for a
  // new transfer; partial transfers held at once, so that a peer cannot make us hold unbounded state.
  static constexpr std::size_t kRememberedTransfers = 4096;
  static constexpr std::size_t kMaxOpenTransfers = 256;
  static constexpr std::uint64_t kMaxOpenBytes = kMaxTransferBytes;

  struct Shared {  // what claims need after the transfers they were made for gave way
    std::mutex mutex;
    // Reserved by the assemblers alive: those open, and those that gave way while a claim on them
    // still has a payload being written into them. Under mutex, but decremented by ~Entry,
    // which may run with it held or not.
    std::atomic<std::uint64_t> reserved{0};
  };
  struct Entry {
    Entry(std::vector<std::byte> buffer, std::shared_ptr<Shared> s)
        : assembler(std::move(buffer)), shared(std::move(s)) {}
    ~Entry() { shared->reserved -= assembler.reserved(); }
    Assembler assembler;
    std::shared_ptr<Shared> shared;
  };

  // Runs `act` on the assembler of (peer, transfer_id) and counts and delivers what came of it.
  template <class Act>
  Outcome apply(const std::string& peer, std::uint64_t transfer_id, std::uint64_t total_bytes, Link::Counters& counters,
                Act act) {
    std::lock_guard lock(shared_->mutex);
    const Key key{peer, transfer_id};
    if (delivered_.count(key) > 0) {
      ++counters.duplicates;
      return {};
    }
    Entry* entry = entry_for(key, total_bytes);
    if (entry == nullptr) {
      ++counters.rejected;  // no room while transfers that gave way are still being written to
      return {};
    }
    const std::uint64_t reserved = entry->assembler.reserved();
    const Assembler::Result result = act(entry->assembler);
    shared_->reserved += entry->assembler.reserved() - reserved;
    return finish(key, result, counters);
  }

  // A claim made by `act` on the assembler of (peer, p.transfer_id), for a frame whose chunk header
  // is `header` (empty: a payload sent ahead of it).
  template <class Act>
  std::optional<Place> claim(const std::string& peer, const Assembler::Placement& p,
                             std::span<const std::byte> header, Act act) {
    std::lock_guard lock(shared_->mutex);
    const Key key{peer, p.transfer_id};
    if (delivered_.count(key) > 0) return std::nullopt;
    Entry* entry = entry_for(key, p.total_bytes);
    if (entry == nullptr) return std::nullopt;
    const std::uint64_t reserved = entry->assembler.reserved();
    const std::optional<Assembler::Place> place = act(entry->assembler);
    shared_->reserved += entry->assembler.reserved() - reserved;
    if (!place) return std::nullopt;
    std::shared_ptr<Claim> claim;
    try {
      claim.reset(new Claim(shared_, open_.at(key), place->bytes, peer, header, p));
    } catch (...) {  // out of memory (a Claim deleted meanwhile was still settled: it takes no lock)
      entry->assembler.release(place->index);
      throw;
    }
    claim->settled_ = false;  // from here on, dropping it frees its place
    return Place{place->bytes, std::move(claim)};
  }

  // The entry assembling `key`, made when there is none; room is made for a transfer of
  // total_bytes when it has reserved nothing yet, the oldest other partial transfers giving way.
  // nullptr when there is no room even then. Under the mutex.
  Entry* entry_for(const Key& key, std::uint64_t total_bytes) {
    auto it = open_.find(key);
    if (it == open_.end()) {
      if (open_.size() >= kMaxOpenTransfers) drop_open(open_order_.front());
      it = open_.emplace(key, std::make_shared<Entry>(pool_.take(), shared_)).first;
      open_order_.push_back(key);
    }
    // Its first chunk makes the assembler reserve total_bytes (when it takes its place). More than
    // the bound is refused by the assembler itself.
    if (it->second->assembler.reserved() == 0 && total_bytes <= kMaxOpenBytes) {
      while (shared_->reserved + total_bytes > kMaxOpenBytes) {  // others hold it: this one holds none
        const auto other = std::find_if(open_order_.begin(), open_order_.end(), [&](const Key& k) { return k != key; });
        if (other == open_order_.end()) return nullptr;
        drop_open(*other);
      }
    }
    return it->second.get();
  }

  // Counts what the assembler made of a chunk, and delivers the transfer it completed. Under the mutex.
  Outcome finish(const Key& key, const Assembler::Result& result, Link::Counters& counters) {
    Outcome out;
    if (result.verdict == Assembler::Verdict::Duplicate) ++counters.duplicates;
    if (result.verdict == Assembler::Verdict::Rejected) ++counters.rejected;
    if (result.verdict == Assembler::Verdict::Rejected || result.verdict == Assembler::Verdict::Missing)
      out.rerequest = result.rerequest;
    Assembler& assembler = open_.at(key)->assembler;
    if (result.verdict != Assembler::Verdict::Accepted || !assembler.complete()) return out;
    const std::uint16_t tag = assembler.first_header()->tag;
    std::optional<std::vector<std::byte>> bytes;
    try {
      bytes = assembler.take();
    } catch (const Error&) {
      ++counters.rejected;  // every chunk checked out but the whole did not: the sender is broken
    }
    drop_open(key);
    remember(key);
    if (bytes) out.delivered = Received{key.first, key.second, tag, std::move(*bytes)};
    return out;
  }

  void drop_open(Key key) {  // a copy: key may be an element of open_order_
    open_.erase(key);  // ~Entry gives back its reservation, or the last claim on it will
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

  std::shared_ptr<Shared> shared_;
  std::map<Key, std::shared_ptr<Entry>> open_;
  BufferPool pool_;
  std::deque<Key> open_order_;
  std::set<Key> delivered_;
  std::deque<Key> delivered_order_;
};

}  // namespace meridian
