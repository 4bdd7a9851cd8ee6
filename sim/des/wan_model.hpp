#pragma once
// How long a transfer between two sites takes at a given moment: the pair's link (latency with
// its jitter, bandwidth, loss) under whatever [[wan.fault]] is in force when the transfer starts.
#include <cstdint>
#include <vector>

#include "core/util/rng.hpp"
#include "sim/des/wan_link_until_merge.hpp"

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
  // Seconds from `t` until `bytes` sent a -> b at `t` have arrived: a wait for a partition to heal,
  // then one-way latency (jitter drawn from `rng`), then bytes at the bandwidth, slowed by lost
  // packets (resent, so the wire carries 1 / (1 - loss) times the bytes) plus one round trip when
  // any packet of the transfer was lost. Zero between a site and itself.
  double transfer_s(int a, int b, double bytes, double t, Rng& rng) const;
  // The same without jitter or loss: the deterministic part, for choosing a peer.
  double nominal_s(int a, int b, double bytes) const;

 private:
  std::size_t index(int a, int b) const { return static_cast<std::size_t>(a) * n_ + b; }
  bool touches(const WanFault& f, int a, int b) const;
  int n_ = 0;
  std::vector<WanLink> links_;
  std::vector<WanFault> faults_;
};

// One draw of a link's one-way latency in seconds, never below zero.
double sample_latency_s(const WanLink& link, Rng& rng);

}  // namespace meridian::sim
