#pragma once
// How long a transfer between two sites takes at a given moment: the pair's link (latency with
// its jitter, bandwidth, loss) under whatever [[wan.fault]] is in force when the transfer starts,
// behind the transfers already queued in that direction. The figures follow sim/emulator's link
// model, so a simulated run and an emulated one pay the same costs.
#include <cstdint>
#include <vector>

#include "core/util/rng.hpp"
#include "core/config/job_config.hpp"

namespace meridian::sim {

struct WanFault {
  enum class Kind { Partition, Bandwidth, Latency };
  Kind kind = Kind::Partition;
  std::vector<int> sites;  // indices into the scenario's sites
  bool pair = false;       // bandwidth/latency: only the link between the two sites
  double from_s = 0, to_s = 0;
  double bandwidth_mbps = 0;
  double latency_ms = 0;
};

class WanModel {
 public:
  WanModel() = default;
  // Every pair starts on `link`.
  WanModel(int sites, const WanLink& link);

  int sites() const { return n_; }
  void set_link(int a, int b, const WanLink& link);  // both directions
  const WanLink& link(int a, int b) const { return links_[index(a, b)]; }
  void add_fault(WanFault fault) { faults_.push_back(std::move(fault)); }

  // The link a <-> b as faults leave it at time t (a partition is not a link property: see below).
  WanLink effective(int a, int b, double t) const;
  // The earliest time >= t at which neither a nor b is cut off by a partition.
  double unpartitioned(int a, int b, double t) const;
  // Seconds from `t` until `bytes` sent a -> b at `t` have arrived: a wait for a partition to heal
  // and for the direction's earlier transfers to leave, the bytes at the bandwidth, the one-way
  // latency (jitter drawn from `rng`), and a round trip per lost packet (its retransmission).
  // Arrivals in one direction keep their order. Zero between a site and itself.
  double transfer_s(int a, int b, double bytes, double t, Rng& rng);
  // The same without jitter or loss: the deterministic part, for choosing a peer.
  double nominal_s(int a, int b, double bytes) const;

 private:
  std::size_t index(int a, int b) const { return static_cast<std::size_t>(a) * n_ + b; }
  bool touches(const WanFault& f, int a, int b) const;
  int n_ = 0;
  std::vector<WanLink> links_;
  std::vector<double> busy_until_;  // per direction: when its last transfer's bytes are all sent
  std::vector<double> last_due_;    // per direction: when its last transfer arrives
  std::vector<WanFault> faults_;
};

// One draw of a link's one-way latency in seconds, never below zero: normal (sd jitter),
// uniform (+- jitter), or pareto (Lomax of shape 3 and mean jitter, one-sided).
double sample_latency_s(const WanLink& link, Rng& rng);
// How many of `packets` a link losing each with probability `loss` loses: binomial, drawn as
// Poisson for small means and normal for large ones.
double sample_lost_packets(double packets, double loss, Rng& rng);

}  // namespace meridian::sim
