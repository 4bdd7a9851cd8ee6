#pragma once
// The split exchange inside a site ([transport] exchange = "split"; transport/link/striped_link.hpp):
// every replica but the leader keeps a lane, its own link to the peer sites' lanes. Between the
// leader's looks at the other sites (after each round attempt), one short collective brings the
// replicas the leader's stripe orders, the peers' lanes and the emulated WAN's start, and brings
// the leader the stripes the lanes received (Communicator::gather: over Gloo to the leader alone;
// NCCL's default sends every part to every member). The WAN carries each byte once.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "intrasite/comm/communicator.hpp"
#include "sites/replica/kept_parts.hpp"
#include "transport/link/lane.hpp"
#include "transport/link/striped_link.hpp"

namespace meridian {

class SiteLanes {
 public:
  // A replica's lane link: the transport on a port of its own, wrapped in the WAN's shaping when
  // emulated (`site_of` names the site at a peer's lane address).
  using SiteOf = std::function<const std::string*(const std::string&)>;
  using MakeLink = std::function<std::unique_ptr<Link>(SiteOf site_of)>;

  // `on_wan_start`: a member learns the emulated WAN's start (wall-clock seconds) from its leader.
  // `cut_part`: how its lane cuts a part for a peer that takes them; `kept`: where this replica
  // keeps the parts its lane receives (their reports go to the leader instead of the bytes).
  SiteLanes(std::uint16_t stripe_tag, MakeLink make_link, std::function<void(double)> on_wan_start, CutPart cut_part,
            KeptParts& kept)
      : stripe_tag_(stripe_tag),
        make_link_(std::move(make_link)),
        on_start_(std::move(on_wan_start)),
        cut_part_(std::move(cut_part)),
        kept_(kept) {}

  // Every member of the group, at each (re)formation: a member without a lane makes one; the
  // leader gets every member's lane address, in rank order (replica 1 first); others get nothing.
  std::vector<std::string> open(Communicator& group, bool leader);
  // The leader's striped link, which makes the orders and takes the stripes (null: none).
  void lead(StripedLink* striped) { striped_ = striped; }
  // Leader: the peer sites' addresses (own link and lanes) by site name and the WAN's start,
  // shared at the next sync.
  void set_peers(std::map<std::string, std::vector<std::string>> lanes_by_site, std::optional<double> wan_start);
  // Every member together: orders and peers out, stripes in.
  void sync(Communicator& group, bool leader);
  // A replica's copy of a delta its site sends (the leader's own goes through its link).
  void hold(std::vector<std::byte> payload);
  // Leader: what the members' lanes have sent in all, as of the last sync (lanes of members gone
  // since included, up to their last report).
  std::uint64_t lanes_bytes_sent() const { return lanes_sent_; }
  // This replica's lane (null on a leader, or before open()).
  const Lane* lane() const { return lane_.get(); }
  // The deltas this replica's lane holds, in bytes (for its memory ledger).
  std::size_t held_bytes() const { return lane_ ? lane_->held_bytes() : 0; }
  // This replica's lane figures (empty object without a lane).
  nlohmann::json figures() const;

 private:
  void carry(const std::vector<std::byte>& message, int rank);
  void gather_stripes(Communicator& group, bool leader);

  std::uint16_t stripe_tag_;
  MakeLink make_link_;
  std::unique_ptr<Lane> lane_;
  std::function<void(double)> on_start_;
  CutPart cut_part_;
  KeptParts& kept_;
  StripedLink* striped_ = nullptr;
  std::map<std::string, std::vector<std::string>> peers_;  // site -> lanes
  std::map<std::string, std::string> site_of_lane_;
  std::map<std::string, std::string> owner_of_lane_;  // a peer's lane -> its own link's address
  std::optional<double> wan_start_;
  bool peers_changed_ = false;
  std::uint64_t lanes_sent_ = 0;                      // leader: the members' lanes' bytes, summed
  std::map<std::string, std::uint64_t> lane_sent_;     // ... each lane's count as last reported
};

}  // namespace meridian
