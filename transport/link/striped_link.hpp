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
//
// A peer that takes deltas in parts (PeerLanes::parts_unit: its outer state is sharded) gets R
// stripes instead, R its receivers: stripe j is part j of the whole as the peer's replica j holds it
// (Options::cut_part, on the peer's unit), from sender j mod S. A receiver keeps its part
// (Options::keep_part: here for this link's, the replicas' lanes for theirs) and reports it
// (feed_report); once every part of a transfer is reported it is held in parts (take_held), never
// put together.
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "transport/link/link_decorator.hpp"
#include "transport/link/stripes.hpp"

namespace meridian {

// What one replica's lane sends: stripe `index` of `count` of the payload it holds under
// `payload_hash` (total_hash_of its chunk hashes), as transfer (transfer_id, stripe tag), to `to`;
// with a `part_unit`, part `index` of `count` cut on that unit (a peer that takes parts).
struct StripeOrder {
  int lane = 1;  // the replica's rank in its site's group
  std::string to;
  std::uint64_t transfer_id = 0;
  std::uint16_t tag = 0;  // the whole's
  int index = 1, count = 2;
  std::uint64_t payload_hash = 0;
  std::uint64_t payload_bytes = 0;
  std::uint64_t part_unit = 0;
  bool operator==(const StripeOrder&) const = default;
};

// A peer site's lanes (its replicas 1, 2, ...) and, when it takes deltas in parts, its unit.
struct PeerLanes {
  std::vector<std::string> lanes;
  std::uint64_t parts_unit = 0;
  bool operator==(const PeerLanes&) const = default;
};

// Part `index` of `count` of `whole`, cut on `unit`.
using CutPart =
    std::function<std::vector<std::byte>(std::span<const std::byte> whole, int index, int count, std::uint64_t unit)>;

// A transfer whose every part a receiver of this site keeps: their reports, in part order.
struct HeldParts {
  std::string owner;  // the peer's own address
  std::uint64_t transfer_id = 0;
  std::uint16_t tag = 0;
  std::vector<std::vector<std::byte>> reports;
};

class StripedLink final : public LinkDecorator {
 public:
  struct Options {
    std::uint16_t stripe_tag = 0;  // the link tag stripes travel under
    // Whether a send of (transfer_id, tag) goes in stripes when it can: a first send of a delta.
    std::function<bool(std::uint64_t transfer_id, std::uint16_t tag)> stripes;
    // Parts (all three set, or none: no peer gets parts): whether this site can cut on a peer's
    // unit, the cut, and this replica keeping a part that came over this link (its report, or
    // nothing when refused: not its part, or not what a part must be).
    std::function<bool(std::uint64_t unit)> cuts{};
    CutPart cut_part{};
    std::function<std::optional<std::vector<std::byte>>(const std::string& owner, const Stripe&)> keep_part{};
  };
  struct Figures {
    std::uint64_t striped_sends = 0;    // transfers sent in stripes
    std::uint64_t stripes_in = 0;       // stripes taken, own link and lanes
    std::uint64_t assembled = 0;        // transfers put back together and handed out
    std::uint64_t refused = 0;          // stripes malformed, inconsistent, or from no peer's lane
    std::uint64_t let_go = 0;           // incomplete transfers dropped to keep the bound
    std::uint64_t parts_sent = 0;       // transfers sent in parts
    std::uint64_t parts_in = 0;         // parts kept and reported, here and at the lanes
    std::uint64_t held_in_parts = 0;    // transfers whose every part is kept
    std::uint64_t parts_refused = 0;    // parts not kept, or reports that do not fit
  };

  StripedLink(std::unique_ptr<Link> inner, Options options);

  // This site's lanes besides this link: replicas 1 .. lanes of the site's group.
  void set_lanes(int lanes) { lanes_ = lanes; }
  int lanes() const { return lanes_; }
  // Each peer site's lane addresses (its replicas 1, 2, ...), by the peer's own link address.
  // Stripes fed from a peer's own address are its too (a peer with fewer lanes than this site).
  void set_peer_lanes(std::map<std::string, PeerLanes> lanes);
  // The orders made by sends since the last call, for the replicas to carry out.
  std::vector<StripeOrder> take_orders() { return std::exchange(orders_, {}); }
  // A stripe that one of this site's lanes received from a peer's lane at `from`; one from no
  // peer's lane, or malformed, is refused and counted.
  void feed(const std::string& from, std::span<const std::byte> payload);
  // A report of part `index` of `count` of transfer (transfer_id, tag) that a replica of this site
  // keeps, from the peer's lane at `from` (or its own address).
  void feed_report(const std::string& from, std::uint64_t transfer_id, std::uint16_t tag, int index, int count,
                   std::vector<std::byte> report);
  // The transfers held in parts since the last call.
  std::vector<HeldParts> take_held() { return std::exchange(held_, {}); }
  // The group re-formed: what its replicas kept is gone, and so are the reports waiting for more
  // and the transfers held in parts not taken yet (a group of one left takes no parts at all).
  void forget_parts() {
    reports_.clear();
    held_.clear();
  }
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
  void report(const std::string& owner, std::uint64_t transfer_id, std::uint16_t tag, int index, int count,
              std::vector<std::byte> bytes);
  void send_parts(const std::string& peer, const PeerLanes& lanes, std::uint64_t transfer_id, std::uint16_t tag,
                  const std::shared_ptr<const std::vector<std::byte>>& payload, std::uint64_t identity);

  struct Reports {
    std::uint16_t tag = 0;
    std::vector<std::vector<std::byte>> parts;  // empty: not here yet
    int missing = 0;
    std::uint64_t opened = 0;
  };

  Options options_;
  int lanes_ = 0;
  std::map<std::string, PeerLanes> peer_lanes_;                // by the peer's own address
  std::map<std::string, std::string> owner_of_lane_;           // lane or own address -> the peer's own address
  StripeAssembler assembler_;
  std::deque<Received> ready_;
  std::vector<StripeOrder> orders_;
  std::map<std::pair<std::string, std::uint64_t>, Reports> reports_;  // by (owner, transfer id)
  std::uint64_t opened_ = 0;
  std::vector<HeldParts> held_;
  Figures figures_;
};

}  // namespace meridian
