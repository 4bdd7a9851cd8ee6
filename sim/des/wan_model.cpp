#include "sim/des/wan_model.hpp"

#include <algorithm>
#include <cmath>

#include "core/util/error.hpp"
#include "core/util/rng.hpp"

namespace meridian::sim {

WanModel::WanModel(int sites, const WanLink& link, std::uint64_t seed, LinkModelOptions options)
    : n_(sites),
      links_(static_cast<std::size_t>(sites) * static_cast<std::size_t>(sites), link),
      last_due_(links_.size(), 0),
      packet_bytes_(options.packet_bytes),
      loss_rng_(Rng::derive(seed, 0x1055)) {
  directions_.reserve(links_.size());
  for (std::size_t d = 0; d < links_.size(); ++d) directions_.emplace_back(Rng::derive(seed, 0x11c0000 + d).next_u64(), options);
}

void WanModel::set_link(int a, int b, const WanLink& link) {
  MERIDIAN_CHECK(a >= 0 && a < n_ && b >= 0 && b < n_, "a=", a, " b=", b, " sites=", n_);
  links_[index(a, b)] = link;
  links_[index(b, a)] = link;
}

bool WanModel::touches(const WanFault& f, int a, int b) const {
  const auto has = [&](int s) { return std::find(f.sites.begin(), f.sites.end(), s) != f.sites.end(); };
  if (f.pair) return has(a) && has(b);
  return has(a) || has(b);
}

WanLink WanModel::effective(int a, int b, double t) const {
  WanLink l = link(a, b);
  for (const auto& f : faults_) {
    if (t < f.from_s || t >= f.to_s || !touches(f, a, b)) continue;
    if (f.kind == WanFault::Kind::Bandwidth) l.bandwidth_mbps = f.bandwidth_mbps;
    if (f.kind == WanFault::Kind::Latency) l.latency_ms += f.latency_ms;
  }
  return l;
}

double WanModel::unpartitioned(int a, int b, double t) const {
  // Partitions may overlap or abut: move past each one in force until none is.
  for (bool moved = true; moved;) {
    moved = false;
    for (const auto& f : faults_)
      if (f.kind == WanFault::Kind::Partition && t >= f.from_s && t < f.to_s && touches(f, a, b)) {
        // Sites on the same side of a partition still reach each other.
        const auto in = [&](int s) { return std::find(f.sites.begin(), f.sites.end(), s) != f.sites.end(); };
        if (in(a) == in(b)) continue;
        t = f.to_s;
        moved = true;
      }
  }
  return t;
}

double sample_lost_packets(double packets, double loss, Rng& rng) {
  const double mean = packets * loss;
  if (mean <= 0) return 0;
  if (mean > 50) return std::max(0.0, std::round(mean + std::sqrt(mean * (1 - loss)) * rng.normal()));
  // Knuth: multiply uniforms until the product drops below e^-mean.
  const double limit = std::exp(-mean);
  double lost = 0, product = rng.uniform();
  while (product > limit) product *= rng.uniform(), ++lost;
  return std::min(lost, packets);
}

double WanModel::transfer_s(int a, int b, double bytes, double t, double flows) {
  if (a == b) return 0;
  const double start = unpartitioned(a, b, t);
  WanLink l = effective(a, b, start);
  const double lost = sample_lost_packets(std::ceil(bytes / packet_bytes_), l.loss, loss_rng_);
  l.loss = 0;  // paid below
  const std::size_t dir = index(a, b);
  const double due = directions_[dir].arrival(start, static_cast<std::size_t>(bytes), l, flows) +
                     lost / flows * 2 * l.latency_ms / 1000;  // each flow recovers its own losses
  last_due_[dir] = std::max(last_due_[dir], due);
  return last_due_[dir] - t;
}

double WanModel::nominal_s(int a, int b, double bytes) const {
  if (a == b) return 0;
  const WanLink& l = link(a, b);
  const double rate = flows_bytes_per_s(l, 1);
  return l.latency_ms / 1000 + (rate > 0 ? bytes / rate : 0);
}

}  // namespace meridian::sim
