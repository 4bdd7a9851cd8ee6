#pragma once
// How long a transfer between two sites takes at a given moment: the pair's link under whatever
// [[wan.fault]] is in force when the transfer starts, through sim/emulator's LinkDirection (the
// model real emulated runs pay: a token bucket per direction, latency with jitter, FIFO), so a
// simulated run and an emulated one cost the same. Losses cost a round trip each as there, but
// their count is drawn here: std::binomial_distribution over the millions of packets of one
// delta took most of a simulation's time.
#include <cstdint>
#include <vector>

#include "core/config/job_config.hpp"
#include "core/util/rng.hpp"
#include "sim/emulator/link_model.hpp"

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
  // Every pair starts on `link`; each direction draws its jitter and losses from its own stream of
  // `seed`. `options`: the emulator's burst and packet sizes (its defaults unless a test says).
  WanModel(int sites, const WanLink& link, std::uint64_t seed = 1, LinkModelOptions options = {});

  int sites() const { return n_; }
  void set_link(int a, int b, const WanLink& link);  // both directions
  const WanLink& link(int a, int b) const { return links_[index(a, b)]; }
  void add_fault(WanFault fault) { faults_.push_back(std::move(fault)); }

  // The link a <-> b as faults leave it at time t (a partition is not a link property: see below).
  WanLink effective(int a, int b, double t) const;
  // The earliest time >= t at which neither a nor b is cut off by a partition.
  double unpartitioned(int a, int b, double t) const;
  // Seconds from `t` until `bytes` sent a -> b at `t` have arrived: a wait for a partition to heal,
  // then LinkDirection::arrival on the link as faults leave it (over `flows` side by side), plus
  // a round trip per lost packet (the flows recover theirs side by side); arrivals in one
  // direction keep their order. Zero between a site and itself.
  double transfer_s(int a, int b, double bytes, double t, double flows = 1);
  // The same without jitter or loss, over one flow: the deterministic part, for choosing a peer.
  double nominal_s(int a, int b, double bytes) const;

 private:
  std::size_t index(int a, int b) const { return static_cast<std::size_t>(a) * n_ + b; }
  bool touches(const WanFault& f, int a, int b) const;
  int n_ = 0;
  std::vector<WanLink> links_;
  std::vector<LinkDirection> directions_;  // [a * n + b]: a -> b
  std::vector<double> last_due_;           // per direction, losses included
  double packet_bytes_;
  Rng loss_rng_;
  std::vector<WanFault> faults_;
};

// How many of `packets` a link losing each with probability `loss` loses: binomial, drawn as
// Poisson for small means and normal for large ones.
double sample_lost_packets(double packets, double loss, Rng& rng);

}  // namespace meridian::sim
