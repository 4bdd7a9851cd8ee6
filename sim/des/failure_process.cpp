#include "sim/des/failure_process.hpp"

#include <cmath>

namespace meridian::sim {

FailureProcess::FailureProcess(const Scenario& sc, EventQueue& q, int kind) : sc_(sc), q_(q), kind_(kind) {
  const int classes = static_cast<int>(sc.failures.size());
  for (int s = 0; s < static_cast<int>(sc.sites.size()); ++s)
    for (int c = 0; c < classes; ++c) {
      rngs_.push_back(Rng::derive(sc.seed, 0xfa11ULL * 1000003 + static_cast<std::uint64_t>(s * classes + c)));
      schedule_next(s, c, q.now());
    }
  // Outages are told apart from classes by a negative argument: -1 - their index.
  for (std::size_t i = 0; i < sc.outages.size(); ++i)
    q.schedule({.t = sc.outages[i].at_s, .kind = kind, .site = sc.outages[i].site,
                .arg = -1 - static_cast<std::int64_t>(i)});
}

double FailureProcess::rate(int site, int c) const {
  return sc_.failures[c].per_gpu_s * sc_.sites[site].gpus;
}

void FailureProcess::schedule_next(int site, int c, double after) {
  const double lambda = rate(site, c);
  if (lambda <= 0) return;
  Rng& rng = rngs_[static_cast<std::size_t>(site) * sc_.failures.size() + c];
  const double u = 1 - rng.uniform();  // in (0, 1]: the exponential draw stays finite
  q_.schedule({.t = after - std::log(u) / lambda, .kind = kind_, .site = site, .arg = c});
}

void FailureProcess::strike(const Event& e, FailureSink& sink) {
  if (e.arg < 0) {
    const Outage& o = sc_.outages[static_cast<std::size_t>(-1 - e.arg)];
    if (o.whole_site) sink.site_failure(e.site, o.recovery_s, e.t);
    else sink.replica_failure(e.site, o.recovery_s);
    return;
  }
  const int c = static_cast<int>(e.arg);
  const FailureClass& f = sc_.failures[c];
  if (f.whole_site) sink.site_failure(e.site, f.recovery_s, e.t);
  else sink.replica_failure(e.site, f.recovery_s);
  schedule_next(e.site, c, e.t);
}

}  // namespace meridian::sim
