#pragma once
// A replica's own link in a split exchange (striped_link.hpp): it holds copies of the payloads its
// site sends in stripes (the deltas it encoded itself, bit for bit the leader's), sends the stripes
// its leader orders from them, and takes in the stripes peers' lanes send it, for its leader.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "transport/link/link.hpp"
#include "transport/link/striped_link.hpp"

namespace meridian {

class Lane {
 public:
  struct Figures {
    std::uint64_t stripes_sent = 0, bytes_sent = 0;          // stripes' bytes, headers included
    std::uint64_t stripes_received = 0, bytes_received = 0;
    std::uint64_t missing = 0;   // orders for a payload this lane did not hold: the peer asks again
    std::uint64_t refused = 0;   // transfers that were no stripe
  };

  // `keep`: how many payloads are held (the newest). Orders for a delta come in the site's sync
  // right after it is encoded, before the next is: two cover that, and an order for an older one
  // (a peer that joined since) is missing, which the peer's request for the whole makes good.
  // `cut_part`: how it cuts a part for a peer that takes them (StripedLink::Options::cut_part).
  Lane(std::unique_ptr<Link> link, std::uint16_t stripe_tag, CutPart cut_part = {}, std::size_t keep = 2);

  std::string address() const { return link_->address(); }
  // A payload this replica's site may send in stripes.
  void hold(std::shared_ptr<const std::vector<std::byte>> payload);
  // Sends the ordered stripe; false (counted) when the payload is not held.
  bool carry(const StripeOrder& order);
  // The stripes that arrived since the last call, with the lane address each came from (at most
  // `max` of them: the rest wait for the next call).
  std::vector<std::pair<std::string, std::vector<std::byte>>> take_stripes(std::size_t max = 64);
  // The peers' lanes this one exchanges with (Link::set_peers).
  void set_peers(std::set<std::string> peers) { link_->set_peers(std::move(peers), nullptr); }
  const Figures& figures() const { return figures_; }
  std::size_t held_bytes() const;  // the payloads it holds
  Link& link() { return *link_; }

 private:
  struct Held {
    std::uint64_t identity = 0;
    std::shared_ptr<const std::vector<std::byte>> bytes;
  };

  std::unique_ptr<Link> link_;
  std::uint16_t stripe_tag_;
  CutPart cut_part_;
  std::size_t keep_;
  std::deque<Held> held_;
  Figures figures_;
};

}  // namespace meridian
