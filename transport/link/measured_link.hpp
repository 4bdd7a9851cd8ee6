#pragma once
// A Link decorator that measures what its traffic really gets, per peer, whatever carries it (a
// bare link, or the WAN emulator's ShapedLink, whose shaping it then sees like any network):
//   round trip  a probe (8 bytes: the prober's clock) to every peer it talks to, every
//               probe_every_s; the peer's MeasuredLink echoes it from its next receive(), so a
//               sample is the network's round trip plus the peer's pump interval (the min shows
//               the network's share best). Probes are lost, not queued, in a partition: the
//               samples' age tells how long none came back.
//   bandwidth   of transfers of min_bandwidth_bytes or more, as their receiver saw them: bytes /
//               (delivered - sent), where sent is a stamp (the sender's clock, a tiny transfer of
//               its own) that goes ahead of the transfer: latency included, as an application
//               sees it. The inbound figure is measured here; the outbound one is what the peer
//               measured of this site's transfers, carried back in its echoes.
// Timestamps cross processes: the clock is wall-clock seconds (sites on one machine, or kept
// together by NTP). Probes, echoes and stamps use tags and transfer ids callers do not (ids with
// kOwnBit set; callers' ids stay below kEchoBit), and never reach the caller.
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "transport/link/link_decorator.hpp"
#include "transport/link/stamp_book.hpp"

namespace meridian {

class MeasuredLink : public LinkDecorator {
 public:
  static constexpr std::uint16_t kProbeTag = 0xFFFE, kEchoTag = 0xFFFD, kStartTag = 0xFFFC;
  static constexpr std::uint64_t kOwnBit = std::uint64_t{1} << 62;
  static constexpr std::uint64_t kProbeBit = std::uint64_t{1} << 61;
  static constexpr std::uint64_t kEchoBit = std::uint64_t{1} << 60;

  struct Options {
    double probe_every_s = 2.0;
    std::size_t min_bandwidth_bytes = 16 * 1024;  // smaller transfers say more about latency than bandwidth
    std::size_t window = 16;                      // recent samples a figure's median and min are over
  };

  // One measured figure: over the last `window` samples, and how many there were in all.
  struct Figure {
    double median = 0, min = 0;
    std::uint64_t samples = 0;
    double at = 0;  // clock time of the newest sample
  };
  struct Peer {
    std::optional<Figure> rtt_s;     // probe round trips, seconds
    std::optional<Figure> in_mbps;   // the peer's transfers to this site, Mbit/s
    std::optional<Figure> out_mbps;  // this site's transfers to the peer, Mbit/s, as the peer measured them
  };

  // `clock`: wall-clock seconds.
  MeasuredLink(std::unique_ptr<Link> inner, std::function<double()> clock, Options options);

  std::optional<Received> receive(std::chrono::milliseconds timeout) override;

  // By peer address: every peer this link sent to or heard from.
  std::map<std::string, Peer> figures() const;

 private:
  struct Samples {
    std::deque<double> recent;
    std::uint64_t count = 0;
    double at = 0;
    void add(double value, double now, std::size_t window);
    std::optional<Figure> figure() const;
  };
  struct PeerState {
    Samples rtt, in;
    std::optional<Figure> out;
    double next_probe = 0;
  };

  PeerState& peer(const std::string& address);
  // Registers the peer; a transfer big enough to measure gets its start stamp sent ahead.
  bool before_send(const std::string& peer, std::uint64_t transfer_id, std::size_t bytes) override;
  void probe(double now);
  // Handles this decorator's own transfers; false for the caller's.
  bool consume(Received& r, double now);
  void note_delivery(const Received& r, double now);

  std::function<double()> clock_;
  Options options_;
  std::uint64_t next_probe_id_;
  std::map<std::string, PeerState> peers_;
  StampBook stamps_;
};

}  // namespace meridian
