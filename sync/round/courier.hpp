#pragma once
// What a site puts on its link and takes off it, counted. A link delivers each (sender, transfer
// id) once whatever the tag, so every transfer gets an id of its own, a delta sent again (asked
// for after it was lost or refused) included: the round (or step) in the high bits, then 4 bits of
// tag, then 16 of attempt.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "sync/round/cross_site_types.hpp"
#include "sync/round/outbox.hpp"
#include "sync/round/records.hpp"
#include "transport/link/link.hpp"

namespace meridian {

// The round (or step) a transfer id carries.
std::int64_t transfer_number(std::uint64_t transfer_id);

class Courier {
 public:
  // `site_at`: the member site at a link address, null while unknown (bytes are then counted by address).
  Courier(Link& link, std::function<const std::string*(const std::string&)> site_at);

  void send(const std::string& address, LinkTag tag, std::int64_t number, std::span<const std::byte> bytes);
  // The same for bytes the link may keep instead of copying (a state snapshot).
  void send(const std::string& address, LinkTag tag, std::int64_t number,
            std::shared_ptr<const std::vector<std::byte>> bytes);
  // This site's delta of a round: shared with the link (sent to every member without a copy).
  void send(const std::string& address, std::int64_t round, const Outbox::Delta& delta);
  std::optional<Received> receive(std::chrono::milliseconds wait) { return link_.receive(wait); }
  void received(const std::string& site, std::size_t bytes);

  Link& link() const { return link_; }
  // The site's protocol counts, kept here beside the bytes; traffic() adds the link's own.
  CrossSiteTraffic& counts() { return traffic_; }
  CrossSiteTraffic traffic() const;

 private:
  std::uint64_t next_transfer_id(const std::string& address, LinkTag tag, std::int64_t number);
  void count_sent(const std::string& address, std::size_t bytes);

  Link& link_;
  std::function<const std::string*(const std::string&)> site_at_;
  std::map<std::tuple<std::string, LinkTag, std::int64_t>, std::uint16_t> attempts_;  // sends so far
  CrossSiteTraffic traffic_;
};

}  // namespace meridian
