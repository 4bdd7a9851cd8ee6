#pragma once
// What a site's group leader publishes for the site's metrics endpoint (site_keys::figures()), and
// the counts behind it over the life of this replica process.
#include <cstdint>

namespace meridian {

class SiteExchange;
class Store;
class Trainer;
struct StepResult;

class OpsFigures {
 public:
  explicit OpsFigures(double now) : started_(now), last_t_(now) {}
  void joined(double seconds);
  void computed(double step_s);
  void discarded(std::int64_t steps) { discarded_ += steps; }
  void sdc_finding() { ++sdc_findings_; }

  void publish(Store& store, const SiteExchange& exchange, const Trainer& trainer, const StepResult& r,
               double computing_s, double now);

 private:
  double started_, last_t_;
  std::int64_t last_tokens_ = 0;
  std::int64_t joins_ = 0, heals_ = 0, computed_ = 0, discarded_ = 0, sdc_findings_ = 0;
  double last_join_s_ = 0, step_s_ = 0;
};

}  // namespace meridian
