#include "sim/des/wan_model.hpp"

#include <algorithm>
#include <cmath>

#include "core/util/error.hpp"

namespace meridian::sim {

namespace {
constexpr double kPacketBytes = 1500;  // one Ethernet MTU: the unit a loss costs
constexpr double kParetoShape = 3;     // a heavy tail with a finite mean (jitter / 2)
}  // namespace

WanModel::WanModel(int sites, const WanLink& link)
    : n_(sites), links_(static_cast<std::size_t>(sites) * static_cast<std::size_t>(sites), link) {}

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
        const double u = 1 - rng.uniform();  // in (0, 1]
        ms += link.jitter_ms * (std::pow(u, -1 / kParetoShape) - 1);
        break;
      }
    }
  return std::max(0.0, ms) / 1000;
}

double WanModel::transfer_s(int a, int b, double bytes, double t, Rng& rng) const {
  if (a == b) return 0;
  const double start = unpartitioned(a, b, t);
  const WanLink l = effective(a, b, start);
  double s = (start - t) + sample_latency_s(l, rng);
  const double keep = 1 - l.loss;
  if (l.bandwidth_mbps > 0) s += bytes * 8 / (l.bandwidth_mbps * 1e6) / keep;
  if (l.loss > 0) {
    const double packets = std::ceil(bytes / kPacketBytes);
    const double any_lost = 1 - std::pow(keep, packets);
    if (rng.uniform() < any_lost) s += 2 * l.latency_ms / 1000;
  }
  return s;
}

double WanModel::nominal_s(int a, int b, double bytes) const {
  if (a == b) return 0;
  const WanLink& l = link(a, b);
  return l.latency_ms / 1000 + (l.bandwidth_mbps > 0 ? bytes * 8 / (l.bandwidth_mbps * 1e6) / (1 - l.loss) : 0);
}

}  // namespace meridian::sim
