#pragma once
// A site's side of the cross-site protocol (DESIGN.md, steps 2-5), run by the replica that leads
// the site: its membership key on a lease, announcing and sending its deltas, receiving the
// others', proposing commits by compare-and-swap when they are due, and handing out each commit
// once every delta it lists is here and verified. The bulk bytes go over the Link; etcd holds
// only the small records of records.hpp.
//
// Nothing here sleeps or owns a thread: the caller pumps it (poll_* with a time budget), so the
// replicas of the site can stay in step between pumps. Peers' mistakes (a damaged or unannounced
// delta, a malformed request) are refused and counted, never applied and never fatal.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sync/control/etcd_client.hpp"
#include "sync/control/lease_keeper.hpp"
#include "sync/round/commit_rule.hpp"
#include "sync/round/outer_state.hpp"
#include "sync/round/records.hpp"
#include "transport/link/link.hpp"

namespace meridian {

struct CrossSiteOptions {
  std::string job;
  std::string site;
  std::vector<std::string> sites;  // every site of the job, as configured
  CommitRuleOptions rule;
  EtcdOptions etcd;  // for the lease keeper's own client
  std::int64_t lease_ttl_s = 10;
  std::chrono::milliseconds keepalive{2000};
  std::chrono::milliseconds control_poll{20};       // between reads of the control plane while waiting
  std::chrono::milliseconds rerequest_after{1000};  // before asking a peer again for a missing delta
  std::size_t keep_own_rounds = 8;                  // own deltas kept to answer requests
};

struct CrossSiteTraffic {
  std::uint64_t bytes_sent = 0;      // payload bytes this site put on its link, re-sends included
  std::uint64_t bytes_received = 0;  // payload bytes of the transfers delivered to it
  std::uint64_t deltas_sent = 0;     // (delta, peer) pairs
  std::uint64_t deltas_refused = 0;  // delivered whole but not what the announcement or commit says
  std::uint64_t frames_refused = 0;  // refused by the link (malformed, failed checksum)
  std::uint64_t requests_sent = 0;   // deltas asked for again
  std::uint64_t commits_proposed = 0, commits_won = 0;
};

class CrossSite {
 public:
  // `clock`: seconds on a monotonic clock.
  CrossSite(CrossSiteOptions options, EtcdClient& etcd, Link& link, std::function<double()> clock);
  ~CrossSite();  // revokes the lease, so peers see this site leave at once
  CrossSite(const CrossSite&) = delete;
  CrossSite& operator=(const CrossSite&) = delete;

  // Registers this site (once) and pumps for up to `budget`; true once every configured site is a member.
  bool poll_join(std::chrono::milliseconds budget);

  // DiLoCo: announces this site's delta for `a.round` and sends it to every other member.
  void submit(const DeltaAnnouncement& a, std::vector<std::byte> encoded);

  struct Commit {
    CommitRecord record;
    std::vector<float> mean_delta;  // the weighted mean of its deltas, in its order
  };
  // Pumps for up to `budget`; the commit of version state.version() + 1 once it exists and every
  // delta it lists is here and verified. Proposes that commit first when it is due and this site
  // holds everything it needs (whoever proposes, the swap lets one proposal win).
  std::optional<Commit> poll_commit(const OuterState& state, std::chrono::milliseconds budget);

  // The synchronous baseline: every site sends its step's values (gradients and loss) to every
  // other; once all are here, poll_gradients replaces `values` by their mean over sites, summed in
  // site order so every site gets the same bits.
  void send_gradients(std::int64_t step, std::span<const float> values);
  bool poll_gradients(std::int64_t step, std::span<float> values, std::chrono::milliseconds budget);

  CrossSiteTraffic traffic() const;
  std::string describe_wait() const;  // what the latest poll is waiting for, for logs

 private:
  using DeltaKey = std::pair<std::string, std::int64_t>;  // (site, round)

  // Receives and handles transfers until one was handled or `until`; at least one look at the link.
  void pump(double until);
  // Erases the entries whose key matches, handing their bytes back to the link for reuse.
  template <class Map, class Pred>
  void recycle_if(Map& map, Pred pred);
  void handle(Received r);
  // Puts this site's member key on a fresh lease kept alive from another thread; again whenever
  // that lease was lost, so a site that was cut off or stopped for a while comes back.
  void register_member();
  void refresh_members();
  const std::string* site_of(const std::string& address);
  void read_announcements();
  std::optional<Commit> check_control(const OuterState& state);
  // The verified bytes of a listed delta, or null after asking its owner again (rate-limited).
  const std::vector<std::byte>* held(const CommitEntry& e);
  std::vector<float> mean_of(const std::vector<CommitEntry>& entries, std::size_t n);
  void request(const std::string& site, std::int64_t round);
  void send(const std::string& address, LinkTag tag, std::int64_t number, std::span<const std::byte> bytes);
  // The same for bytes this site keeps (its own deltas): the link shares them instead of copying.
  void send(const std::string& address, LinkTag tag, std::int64_t number,
            std::shared_ptr<const std::vector<std::byte>> bytes);
  std::uint64_t next_transfer_id(const std::string& address, LinkTag tag, std::int64_t number);

  CrossSiteOptions options_;
  RoundKeys keys_;
  EtcdClient& etcd_;
  Link& link_;
  std::function<double()> clock_;
  std::int64_t lease_ = 0;
  std::unique_ptr<LeaseKeeper> keeper_;
  double next_control_ = 0;
  std::map<std::string, MemberRecord> members_;      // by site
  std::map<std::string, std::string> site_by_addr_;  // link address -> site
  std::map<DeltaKey, DeltaAnnouncement> announced_;  // not merged yet
  std::int64_t announced_revision_ = 0;               // etcd revision read up to
  std::map<std::string, std::int64_t> applied_;       // per site, the newest round merged
  std::map<DeltaKey, std::vector<std::byte>> arrived_;
  std::map<DeltaKey, std::uint64_t> verified_;  // arrived_ entries whose bytes matched this checksum
  std::optional<Commit> proposed_;   // this site's latest proposal and its mean
  std::map<std::int64_t, std::shared_ptr<const std::vector<std::byte>>> own_;  // by round; shared with the link
  std::map<DeltaKey, double> requested_at_;
  std::map<std::pair<std::string, std::int64_t>, std::vector<std::byte>> gradients_;  // (site, step)
  std::map<std::tuple<std::string, LinkTag, std::int64_t>, std::uint16_t> attempts_;  // sends so far
  CrossSiteTraffic traffic_;
  std::string waiting_;
};

}  // namespace meridian
