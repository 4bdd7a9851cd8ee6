#pragma once
// A transfer that a site's replicas carry side by side (the split exchange, docs/wan.md): cut into
// `count` stripes, stripe i goes from the sending site's replica i to the receiving site's replica
// i, each over that replica's own link, so that the site's bytes leave on `count` streams at once
// (a stream across a WAN gets its window over the round trip at most, not the link's bandwidth).
// The receiving site puts the stripes back together in any order, then hands the whole on as if
// one link had carried it; the protocol checks it against its announced digest as always.
//
// A stripe is the payload of an ordinary link transfer (whose chunk hashes protect it on the way):
// a length-prefixed StripeHeader (transport/schemas/chunk.capnp), then the stripe's bytes.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "transport/link/link.hpp"

namespace meridian {

inline constexpr int kMaxStripes = 256;

// Where stripe `index` of `count` lies in a whole of `total` bytes: [first, second).
std::pair<std::uint64_t, std::uint64_t> stripe_bounds(std::uint64_t total, int index, int count);

// Stripe `index` of `count` of `payload`, the whole of transfer (transfer_id, tag): header and bytes.
std::vector<std::byte> make_stripe(std::uint64_t transfer_id, std::uint16_t tag, std::span<const std::byte> payload,
                                   int index, int count);

// Part `index` of `count` of a transfer as its receiver cuts it (`part`: bytes the sender's cut
// made of the whole, not a share of them): header and bytes.
std::vector<std::byte> make_part_stripe(std::uint64_t transfer_id, std::uint16_t tag, std::span<const std::byte> part,
                                        int index, int count);

struct Stripe {
  std::uint64_t transfer_id = 0;
  std::uint16_t tag = 0;
  int index = 0, count = 1;
  std::uint64_t total_bytes = 0;
  std::span<const std::byte> bytes;  // a view into the payload read
  bool part = false;                 // make_part_stripe's: never put together with the others
};
// Error(Peer) naming what is wrong: a short or malformed header, another schema version, an index
// out of its count, bytes that are not the stripe's share of the total.
Stripe read_stripe(std::span<const std::byte> payload);

// Puts the stripes of transfers back together. Bounded: at most `max_open` transfers are kept
// incomplete (the oldest goes first: its sender's protocol asks for it again), and a whole larger
// than `max_bytes` is refused before anything is reserved for it.
class StripeAssembler {
 public:
  explicit StripeAssembler(std::size_t max_open = 16, std::uint64_t max_bytes = std::uint64_t{1} << 36)
      : max_open_(max_open), max_bytes_(max_bytes) {}

  // A stripe of a transfer from `sender` (the address its whole is answered at): the whole, once
  // every stripe is here. A duplicate is ignored. Error(Peer) for a stripe that disagrees with the
  // ones of its transfer already here (count, tag, total) or whose whole is too large; what was held
  // of that transfer is dropped then.
  std::optional<Received> add(const std::string& sender, const Stripe& stripe);
  std::size_t open() const { return open_.size(); }
  std::uint64_t dropped() const { return dropped_; }  // incomplete transfers let go to keep the bound

 private:
  struct Open {
    std::uint16_t tag = 0;
    int count = 1;
    std::vector<std::byte> bytes;
    std::vector<bool> have;
    int missing = 0;
    std::uint64_t opened = 0;  // order of arrival, for the bound
  };
  using Key = std::pair<std::string, std::uint64_t>;

  std::size_t max_open_;
  std::uint64_t max_bytes_;
  std::map<Key, Open> open_;
  std::uint64_t opened_ = 0, dropped_ = 0;
};

}  // namespace meridian
