#pragma once
// What CrossSite and its parts report: events for the site's log, and traffic counters.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace meridian {

using DeltaKey = std::pair<std::string, std::int64_t>;  // (site, round)

// What happened to a peer's delta or state that the site's log should say.
struct CrossSiteEvent {
  // "delta_refused" (values no commit may apply: the sender is flagged), "delta_damaged" (bytes
  // not as announced: fetched again), "state_requested", "state_refused", "commit_unreadable", "commit_record_replaced", "member_key_restored",
  // "control_unreachable", "control_restored", "delta_withdrawn" (its own, by a restarted site),
  // "link_refused" (frames from a sender that is no member: site is its claimed name, number the frames)
  std::string kind;
  std::string site;  // the peer
  std::int64_t number = 0;  // its round, or the version
  std::string detail;
};

struct CrossSiteTraffic {
  std::uint64_t bytes_sent = 0;      // payload bytes this site put on its link, re-sends included
  std::uint64_t bytes_received = 0;  // payload bytes of the transfers delivered to it
  std::uint64_t deltas_sent = 0;     // (delta, peer) pairs
  std::uint64_t deltas_refused = 0;  // delivered whole but not what the announcement or commit says
  std::uint64_t frames_refused = 0;  // refused by the link (malformed, failed checksum)
  std::uint64_t requests_sent = 0;   // deltas asked for again
  std::uint64_t deltas_screened_out = 0;  // arrived intact but refused by the screen (NaN, norm, size)
  std::uint64_t states_sent = 0, states_adopted = 0, states_refused = 0;
  std::uint64_t commits_proposed = 0, commits_won = 0;
  std::uint64_t commits_by_deadline = 0;  // won proposals made without every live site's delta
  // The most bytes of this site's deltas at once that it had sent (to every peer) and no commit
  // had merged yet: what its rounds keep in flight over the WAN.
  std::uint64_t peak_bytes_in_flight = 0;
  struct PeerBytes {
    std::uint64_t sent = 0, received = 0;  // payload bytes handed to the link for it / delivered from it
  };
  std::map<std::string, PeerBytes> peers;  // by site (by link address while its site is unknown)
};

using CrossSiteEvents = std::vector<CrossSiteEvent>;

}  // namespace meridian
