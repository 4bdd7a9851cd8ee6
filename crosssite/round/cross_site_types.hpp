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
  // not as announced: fetched again), "state_requested", "state_refused", "commit_unreadable",
  // "commit_record_replaced", "commit_rewritten" (a second readable record of a version: the first stands),
  // "member_key_restored", "control_unreachable", "control_restored", "delta_withdrawn" (its own, by a restarted site),
  // "link_refused" (frames from a sender that is no member: site is its claimed name, number the frames),
  // "version_diverged" (its own copy of the outer state is not its version), "copy_rebuilt" (that
  // copy rebuilt from its checkpoint and journal: number the version reached), "copy_not_rebuilt",
  // "commit_contradicted" (a record another site's vouch, or this site's newest record, says is not
  // the one applied: site is the voucher, never applied; naming this site, the record of the
  // version a restart holds is not the one its own vouch names), "commit_restored" (a record this site
  // applied, written over since, put back), "ended_cut_off" (its steps done, the control plane
  // away past end_unreachable_s: it ends on version `number`)
  std::string kind;
  std::string site;  // the peer
  std::int64_t number = 0;  // its round, or the version
  std::string detail;
};

// What a site refused of its peers, one count per cause: a peer's or the network's faults, never
// applied and never fatal. Prometheus shows them as meridian_refused_total{what="<name>"}.
struct Refusals {
  std::uint64_t deltas_damaged = 0;              // delivered whole, but not the bytes announced
  std::uint64_t deltas_over_hold_bound = 0;      // a member's deltas past what this site holds of it at once
  std::uint64_t announcements_unreadable = 0;    // records under the announcements' prefix that do not decode
  std::uint64_t requests_malformed = 0;          // delta or state requests that do not decode
  std::uint64_t transfers_from_non_members = 0;  // from a link address no member record names
  std::uint64_t transfers_unknown_tag = 0;       // of no kind this protocol version speaks
  std::uint64_t gradients_refused = 0;           // the synchronous baseline's, past what this site holds of a member

  std::uint64_t total() const;
  // (name, count) in the order above: the metric's labels and the summary's keys.
  std::vector<std::pair<const char*, std::uint64_t>> named() const;
};

struct CrossSiteTraffic {
  std::uint64_t bytes_sent = 0;      // payload bytes this site put on its link, re-sends included
  std::uint64_t bytes_received = 0;  // payload bytes of the transfers delivered to it
  std::uint64_t deltas_sent = 0;     // (delta, peer) pairs
  Refusals refused;
  std::uint64_t frames_refused = 0;  // refused by the link (malformed, failed checksum)
  std::uint64_t requests_sent = 0;   // deltas asked for again
  // This site's deltas sent again on a peer's request, and their bytes (in bytes_sent too).
  std::uint64_t deltas_resent = 0, bytes_resent = 0;
  std::uint64_t deltas_screened_out = 0;  // arrived intact but refused by the screen (NaN, norm, size)
  std::uint64_t states_sent = 0, states_adopted = 0, states_refused = 0;
  std::uint64_t copies_rebuilt = 0;  // its own copy taken from its checkpoint and journal (rebuilt_copy.hpp)
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
