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
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "crosssite/round/cross_site_types.hpp"
#include "crosssite/round/outbox.hpp"
#include "crosssite/round/records.hpp"
#include "transport/link/link.hpp"

namespace meridian {

// The round (or step) a transfer id carries.
std::int64_t transfer_number(std::uint64_t transfer_id);
// Whether a transfer id is its payload's first send to that address (not an answer to a request).
bool first_attempt(std::uint64_t transfer_id);

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
  // The link exchanges with these addresses only (the members', as last read; Link::set_peers),
  // and with those `vouch` admits.
  void list_peers(std::set<std::string> addresses, std::function<bool(const std::string&)> vouch) {
    link_.set_peers(std::move(addresses), std::move(vouch));
  }
  // Whether a sender the link does not list is a member after all (one that joined since the list
  // was made, and sent before this site read the members again): asks `refresh` (a read of the
  // members) once per address, and at most kStrangerReads times a second, so that a flood of forged
  // names costs the control plane little.
  bool vouch(const std::string& address, double now, const std::function<void()>& refresh);
  static constexpr int kStrangerReads = 10;
  // A "link_refused" event for each sender the link turned away since the last report: the first
  // at once, then at most one report every kRefusalReportS of `now` (a stranger's flood must not
  // flood the log too).
  void report_refusals(double now, CrossSiteEvents& events);
  static constexpr double kRefusalReportS = 10;

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
  double refusals_reported_at_ = -kRefusalReportS;
  std::set<std::string> vouched_;  // addresses asked about (cleared past a bound)
  double stranger_second_ = -1;    // the second the stranger reads below were made in
  int stranger_reads_ = 0;
};

}  // namespace meridian
