#include "sim/des/wan_model.hpp"

#include <algorithm>
#include <cmath>

#include "core/util/error.hpp"

namespace meridian::sim {

namespace {
constexpr double kPacketBytes = 1500;  // one Ethernet MTU: the unit a loss costs
constexpr double kParetoShape = 3;     // a heavy tail with a finite mean
}  // namespace

WanModel::WanModel(int sites, const WanLink& link)
    : n_(sites),
      links_(static_cast<std::size_t>(sites) * static_cast<std::size_t>(sites), link),
      busy_until_(links_.size(), 0),
      last_due_(links_.size(), 0) {}

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

double sample_latency_s(const WanLink& link, Rng& rng) {
  double ms = link.latency_ms;
  if (link.jitter_ms > 0) switch (link.jitter) {
      case WanLink::Jitter::Normal: ms += link.jitter_ms * rng.normal(); break;
      case WanLink::Jitter::Uniform: ms += link.jitter_ms * (2 * rng.uniform() - 1); break;
      case WanLink::Jitter::Pareto: {
        const double u = 1 - rng.uniform();  // in (0, 1]: the draw stays finite
        ms += link.jitter_ms * (kParetoShape - 1) * (std::pow(u, -1 / kParetoShape) - 1);
        break;
      }
    }
  return std::max(0.0, ms) / 1000;
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

double WanModel::transfer_s(int a, int b, double bytes, double t, Rng& rng) {
  if (a == b) return 0;
  const std::size_t dir = index(a, b);
  const double start = std::max(unpartitioned(a, b, t), busy_until_[dir]);
  const WanLink l = effective(a, b, start);
  const double sent = start + (l.bandwidth_mbps > 0 ? bytes * 8 / (l.bandwidth_mbps * 1e6) : 0);
  busy_until_[dir] = sent;
  const double lost = l.loss > 0 ? sample_lost_packets(std::ceil(bytes / kPacketBytes), l.loss, rng) : 0;
  const double due = std::max(last_due_[dir], sent + sample_latency_s(l, rng) + lost * 2 * l.latency_ms / 1000);
  last_due_[dir] = due;
  return due - t;
}

double WanModel::nominal_s(int a, int b, double bytes) const {
  if (a == b) return 0;
  const WanLink& l = link(a, b);
  return l.latency_ms / 1000 + (l.bandwidth_mbps > 0 ? bytes * 8 / (l.bandwidth_mbps * 1e6) : 0);
}

}  // namespace meridian::sim
