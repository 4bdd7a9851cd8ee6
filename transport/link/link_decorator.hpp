#pragma once
// A Link that wraps another (the WAN emulator's shaping, the measurements) and passes through
// what it does not change: the address peers reach, the chunk size, recycled buffers, the link's
// counters, the peers and their refusals, and every form of send, once the decorator's before_send let it go.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "transport/link/link.hpp"

namespace meridian {

class LinkDecorator : public Link {
 public:
  explicit LinkDecorator(std::unique_ptr<Link> inner) : inner_(std::move(inner)) {}
  std::string address() const override { return inner_->address(); }
  std::size_t chunk_bytes() const override { return inner_->chunk_bytes(); }
  void recycle(std::vector<std::byte> bytes) override { inner_->recycle(std::move(bytes)); }
  Counters counters() const override { return inner_->counters(); }
  void set_peers(std::set<std::string> peers, std::function<bool(const std::string&)> vouch) override {
    inner_->set_peers(std::move(peers), std::move(vouch));
  }
  std::map<std::string, std::uint64_t> take_refusals() override { return inner_->take_refusals(); }

  void send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
            std::span<const std::byte> payload) final {
    if (before_send(peer, transfer_id, payload.size())) inner_->send(peer, transfer_id, tag, payload);
  }
  void send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
            std::shared_ptr<const std::vector<std::byte>> payload) final {
    if (before_send(peer, transfer_id, payload->size())) inner_->send(peer, transfer_id, tag, std::move(payload));
  }
  // Not final: a decorator may send a hashed payload another way (StripedLink cuts it into stripes),
  // calling before_send itself where it sends through the inner link.
  void send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
            std::shared_ptr<const std::vector<std::byte>> payload, ChunkHashes hashes) override {
    if (before_send(peer, transfer_id, payload->size()))
      inner_->send(peer, transfer_id, tag, std::move(payload), std::move(hashes));
  }

 protected:
  // Before a transfer of `bytes` to peer leaves (its own stamps may go ahead of it): whether it goes.
  virtual bool before_send(const std::string& peer, std::uint64_t transfer_id, std::size_t bytes) = 0;

  std::unique_ptr<Link> inner_;
};

}  // namespace meridian
