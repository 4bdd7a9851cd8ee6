#pragma once
// The leader's link in a split exchange (stripes.hpp): a transfer of a striped tag, sent for the
// first time to a peer site that lists lanes (or from a site that has some), goes in stripes, one
// per flow between the two sites: with S senders here (this link, then the replicas' lanes) and R
// receivers there (the peer's own link, then its lanes), max(S, R) stripes, stripe i from sender
// i mod S to receiver i mod R. A stripe of this link's goes at once; one of replica k's is an order
// for it, which it sends from its own copy of the bytes (every replica encodes the same delta)
// over its lane. Stripes that arrive, over this link or through the replicas' lanes (feed), are
// put back together and handed out as one transfer from the peer's own address.
//
// Only first sends are striped (`stripes` says which): a transfer asked for again goes whole over
// this link, so a replica that lost its copy, died or was not there costs one re-request, no more.
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "transport/link/link_decorator.hpp"
#include "transport/link/stripes.hpp"

namespace meridian {

// What one replica's lane sends: stripe `index` of `count` of the payload it holds under
// `payload_hash` (total_hash_of its chunk hashes), as transfer (transfer_id, stripe tag), to `to`.
struct StripeOrder {
  int lane = 1;  // the replica's rank in its site's group
  std::string to;
  std::uint64_t transfer_id = 0;
  std::uint16_t tag = 0;  // the whole's
  int index = 1, count = 2;
  std::uint64_t payload_hash = 0;
  std::uint64_t payload_bytes = 0;
  bool operator==(const StripeOrder&) const = default;
};

class StripedLink final : public LinkDecorator {
 public:
  struct Options {
    std::uint16_t stripe_tag = 0;  // the link tag stripes travel under
    // Whether a send of (transfer_id, tag) goes in stripes when it can: a first send of a delta.
    std::function<bool(std::uint64_t transfer_id, std::uint16_t tag)> stripes;
  };
  struct Figures {
    std::uint64_t striped_sends = 0;    // transfers sent in stripes
    std::uint64_t stripes_in = 0;       // stripes taken, own link and lanes
    std::uint64_t assembled = 0;        // transfers put back together and handed out
    std::uint64_t refused = 0;          // stripes malformed, inconsistent, or from no peer's lane
    std::uint64_t let_go = 0;           // incomplete transfers dropped to keep the bound
  };

  StripedLink(std::unique_ptr<Link> inner, Options options);

  // This site's lanes besides this link: replicas 1 .. lanes of the site's group.
  void set_lanes(int lanes) { lanes_ = lanes; }
  int lanes() const { return lanes_; }
  // Each peer site's lane addresses (its replicas 1, 2, ...), by the peer's own link address.
  // Stripes fed from a peer's own address are its too (a peer with fewer lanes than this site).
  void set_peer_lanes(std::map<std::string, std::vector<std::string>> lanes);
  // The orders made by sends since the last call, for the replicas to carry out.
  std::vector<StripeOrder> take_orders() { return std::exchange(orders_, {}); }
  // A stripe that one of this site's lanes received from a peer's lane at `from`; one from no
  // peer's lane, or malformed, is refused and counted.
  void feed(const std::string& from, std::span<const std::byte> payload);
  Figures figures() const;

  using LinkDecorator::send;
  // Striped when this site or the peer has lanes and `stripes` says so; whole otherwise.
  void send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
            std::shared_ptr<const std::vector<std::byte>> payload, ChunkHashes hashes) override;
  std::optional<Received> receive(std::chrono::milliseconds timeout) override;

 protected:
  bool before_send(const std::string&, std::uint64_t, std::size_t) override { return true; }

 private:
  // A stripe from `sender` (a peer's own address): the whole when it completes one.
  void take(const std::string& sender, std::span<const std::byte> payload);

  Options options_;
  int lanes_ = 0;
  std::map<std::string, std::vector<std::string>> peer_lanes_;  // by the peer's own address
  std::map<std::string, std::string> owner_of_lane_;           // lane or own address -> the peer's own address
  StripeAssembler assembler_;
  std::deque<Received> ready_;
  std::vector<StripeOrder> orders_;
  Figures figures_;
};

}  // namespace meridian
