#pragma once
// One direction of one emulated WAN link: when a transfer handed over at `now` is due at the far
// end, as a function of (now, the direction's state, the link's figures, a seeded random draw).
//   bandwidth  a token bucket (rate = bandwidth_mbps, depth = burst_bytes) the transfer drains; one
//              larger than the tokens left waits for the rest to accrue, and transfers after it
//              queue behind (per direction: the two directions of a link do not share bandwidth).
//              A transfer carried by one flow drains it at stream_mbps at most (TCP's window over
//              the round trip); one spread over parallel flows (a split exchange: one per replica)
//              at that many times it, up to bandwidth_mbps.
//   latency    one way, plus a jitter draw: normal (sd jitter_ms), uniform (+-jitter_ms), both cut
//              so the latency stays >= 0; pareto: a one-sided heavy tail of mean jitter_ms (Lomax,
//              shape 3: most draws small, a few several times the mean)
//   loss       each packet of the transfer is lost with probability `loss`, and each loss costs one
//              round trip (2 x latency: its fast retransmission). The congestion window's shrinking
//              after a loss is not modelled, so heavy loss is gentler here than on TCP.
//   order      FIFO: a transfer is never due before one handed over earlier in the same direction
#include <cstddef>
#include <cstdint>
#include <random>

#include "core/config/job_config.hpp"

namespace meridian {

struct LinkModelOptions {
  double burst_bytes = 64 * 1024;  // the bucket's depth: what goes out at once after a quiet spell
  double packet_bytes = 1500;      // the unit a loss hits (an Ethernet MTU)
};

class LinkDirection {
 public:
  explicit LinkDirection(std::uint64_t seed, LinkModelOptions options = {});

  // Seconds at which a transfer of `bytes` handed over at `now` arrives whole; advances the state.
  // `link` may change between calls (faults): each transfer goes at the figures of its hand-over.
  // `flows`: how many flows carry it side by side (transfer_parallelism), 1 for a link's own.
  double arrival(double now, std::size_t bytes, const WanLink& link, double flows = 1);

 private:
  LinkModelOptions options_;
  std::mt19937_64 rng_;
  double tokens_;         // bytes; negative while a transfer is still draining the bucket
  double tokens_at_ = 0;  // when tokens_ was last brought up to date
  bool started_ = false;
  double last_due_ = 0;
};

// Bytes per second that `flows` side-by-side flows get together on `link`: its bandwidth, or flows x
// stream_mbps where that is less; 0 when neither limits.
double flows_bytes_per_s(const WanLink& link, double flows);
// How many flows carry a transfer between a site of `from` replicas and one of `to` in a split
// exchange: max(from, to), stripe i from sender i mod from to receiver i mod to, each a distinct
// pair (transport/link/striped_link.hpp). The same count as cutting the bytes by both sites' shards
// and sending each overlap as a flow: the largest overlap is the first, [0, 1 / max(from, to)).
double transfer_parallelism(int from, int to);
// A one-way latency draw in seconds for `link` (latency + jitter, >= 0).
double draw_latency_s(const WanLink& link, std::mt19937_64& rng);
// The retransmission delay in seconds that losses add to a transfer of `bytes`.
double draw_loss_delay_s(const WanLink& link, std::size_t bytes, double packet_bytes, std::mt19937_64& rng);

}  // namespace meridian
