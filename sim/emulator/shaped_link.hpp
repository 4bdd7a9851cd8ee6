#pragma once
// A Link decorator that makes loopback behave like the job's WAN (wan_schedule.hpp): every
// transfer is held back until its emulated arrival, and transfers across a partition are lost.
//
// Shaping happens on the receiving side, without threads: when the inner link hands a transfer
// over, its direction's LinkDirection says when it would have arrived over the emulated link
// (bandwidth, latency, jitter, losses), and receive() holds it until then, waiting on the inner
// link meanwhile for no longer than the next due time. Shaping the sending side instead would need
// a thread, or would delay a transfer until the sender next calls its link; the receiver calls it
// every pump anyway. The emulated link starts when the transfer was sent, not when loopback
// finished carrying it (loopback takes ~0.1-0.5 s for 64 MiB on a busy machine): before each
// transfer, the sending ShapedLink sends a stamp (a tiny transfer with tag kStampTag and id
// transfer_id | kStampBit holding its wall-clock send time), which the receiving one consumes.
// A transfer without a stamp (from an unshaped link, or whose stamp was lost) starts when it
// arrived. Either way it is never handed out before it really arrived.
//
// A partition drops transfers both ways: send() hands nothing to the inner link while this site
// or the peer's is cut off, and a transfer that arrives, or falls due, while the two sides are
// apart is handed back to the inner link unread. A partition does not delay what it lets through.
//
// Peers are known by address; `site_of` names the site at an address (null while unknown: the
// default link, and only this site's own partition, apply). Used by one thread at a time, like
// any Link.
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "sim/emulator/link_model.hpp"
#include "sim/emulator/wan_schedule.hpp"
#include "transport/link/link_decorator.hpp"
#include "transport/link/stamp_book.hpp"

namespace meridian {

class ShapedLink : public LinkDecorator {
 public:
  static constexpr std::uint16_t kStampTag = 0xFFFF;
  static constexpr std::uint64_t kStampBit = std::uint64_t{1} << 63;  // callers' transfer ids stay below it

  struct Shaping {
    std::uint64_t delivered = 0;         // transfers handed out after their emulated arrival
    std::uint64_t dropped_sent = 0;      // sends not made: a partition held this site and the peer apart
    std::uint64_t dropped_received = 0;  // transfers lost to a partition on the way in
    double transit_s = 0;                // emulated time from send to arrival of the delivered ones, summed
  };

  // `clock`: wall-clock seconds, the schedule's time base. `seed` draws jitter and losses.
  ShapedLink(std::unique_ptr<Link> inner, std::string site, std::shared_ptr<const WanSchedule> schedule,
             std::function<const std::string*(const std::string& address)> site_of, std::function<double()> clock,
             std::uint64_t seed, LinkModelOptions model = {});

  std::optional<Received> receive(std::chrono::milliseconds timeout) override;

  Shaping shaping() const { return shaping_; }

 private:
  struct Held {
    Received transfer;
    double sent = 0;  // when its emulated link took it: its stamp, else when it arrived
  };

  void stamp(const std::string& peer, std::uint64_t transfer_id);
  // Whether a transfer to peer goes (stamped) or is dropped (counted) by a partition.
  bool before_send(const std::string& peer, std::uint64_t transfer_id, std::size_t bytes) override;
  // The peer's site, remembered once known (a member's address keeps naming it after it left).
  const std::string* peer_site(const std::string& address);
  bool apart(const std::string& address, double now);
  void admit(Received r);
  std::optional<Received> take_due(double now);

  std::string site_;
  std::shared_ptr<const WanSchedule> schedule_;
  std::function<const std::string*(const std::string&)> site_of_;
  std::function<double()> clock_;
  std::uint64_t seed_;
  LinkModelOptions model_;
  std::map<std::string, std::string> known_;          // address -> site
  std::map<std::string, LinkDirection> directions_;   // by the sender's address
  std::multimap<double, Held> held_;                  // by due time; equal times keep their order
  StampBook stamps_;
  Shaping shaping_;
};

}  // namespace meridian
