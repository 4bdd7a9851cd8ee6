#pragma once
// The parts of peers' deltas one replica keeps, in a split exchange into a site whose outer state
// is sharded (transport/link/striped_link.hpp: the peer cuts each delta on this site's outer map,
// part i for the group's rank i). A part is checked to be the one this rank's state holds and to
// be an encoded delta of that many values; its report (crosssite/round/held_parts.hpp) goes to the
// leader, and at the commit that merges it this replica fills in its own encoding of the ranges
// it holds, its part and, from the next rank, its mirror's (GroupChannel).
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/model/shard_map.hpp"
#include "transport/link/stripes.hpp"

namespace meridian {

// Part `index` of `count` of an encoded delta cut on `unit` (ShardMap's cut of its values): what a
// peer that takes parts gets (StripedLink::Options::cut_part).
std::vector<std::byte> cut_part_on(std::span<const std::byte> whole, int index, int count, std::uint64_t unit);

class KeptParts {
 public:
  // At most `max_kept` parts (the oldest goes first: a commit that still lists it fails its apply,
  // and the group, re-formed, asks for the delta whole).
  explicit KeptParts(std::size_t max_kept = 8) : max_kept_(max_kept) {}

  // The group (re)formed under `map`, this replica its rank `rank`: what was kept is gone. With no
  // map the group takes no parts (a group of one holds its state whole): every part is refused.
  void reform(int rank, std::optional<ShardMap> map);
  // A part from the peer at link address `owner`: its report, or nothing (counted) when it is not
  // this rank's part under the group's cut, not an encoded delta of its values, or a transfer's
  // part this replica took before (a duplicate on the way, or a peer's second try with other
  // bytes): the first one's report is the one the leader judged, so its bytes are the ones kept.
  std::optional<std::vector<std::byte>> keep(const std::string& owner, const Stripe& stripe);
  // The part a commit names (`ref`: held_parts.hpp's), null when not kept.
  const std::vector<std::byte>* part(const std::string& ref) const;
  void forget(const std::string& ref);
  // The parts a preview of this site's proposal was filled in from: its commit, which comes
  // without deltas when every replica holds the preview, lets go of them (forget_previewed).
  void previewed(std::vector<std::string> refs) { previewed_ = std::move(refs); }
  void forget_previewed();
  std::size_t held_bytes() const;
  std::uint64_t refused() const { return refused_; }

 private:
  std::size_t max_kept_;
  int rank_ = 0;
  std::optional<ShardMap> map_;
  std::deque<std::pair<std::string, std::vector<std::byte>>> kept_;
  std::deque<std::string> taken_;  // the newest parts' names, kept or let go since (4 x max_kept_)
  std::vector<std::string> previewed_;
  std::uint64_t refused_ = 0;
};

}  // namespace meridian
