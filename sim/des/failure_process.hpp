#pragma once
// Failures as independent Poisson processes, one per (site, class) with rate = per-GPU rate x the
// site's GPUs, each drawing from its own stream of the seed: the same failures strike at the same
// times whatever algorithm is simulated, so algorithms are compared on one history.
#include <vector>

#include "core/util/rng.hpp"
#include "sim/des/event_queue.hpp"
#include "sim/des/scenario.hpp"

namespace meridian::sim {

class FailureSink {
 public:
  virtual ~FailureSink() = default;
  virtual void replica_failure(int site, double recovery_s) = 0;
  virtual void site_failure(int site, double recovery_s, double t) = 0;
};

class FailureProcess {
 public:
  // Schedules the first failure of every (site, class) with a rate > 0, and every outage, as events of `kind`.
  FailureProcess(const Scenario& scenario, EventQueue& queue, int kind);
  // Delivers the failure `e` stands for and schedules the next of its (site, class).
  void strike(const Event& e, FailureSink& sink);
  // Failures per second of class c at site s.
  double rate(int site, int c) const;

 private:
  void schedule_next(int site, int c, double after);
  const Scenario& sc_;
  EventQueue& q_;
  int kind_;
  std::vector<Rng> rngs_;  // [site * classes + class]
};

}  // namespace meridian::sim
