#include "sim/emulator/wan_schedule.hpp"

#include <algorithm>

namespace meridian {

namespace {

bool names(const std::vector<std::string>& sites, std::string_view site) {
  return std::find(sites.begin(), sites.end(), site) != sites.end();
}

// Whether a bandwidth or latency fault touches the link a <-> b.
bool touches(const JobConfig::Wan::Fault& f, std::string_view a, std::string_view b) {
  if (f.pair) return names(f.sites, a) && names(f.sites, b) && a != b;
  return names(f.sites, a) || names(f.sites, b);
}

}  // namespace

WanSchedule::WanSchedule(const JobConfig& config) : default_link_(config.wan.link), faults_(config.wan.faults) {
  for (const auto& p : config.wan.links) pairs_[std::minmax(p.a, p.b)] = p.link;
}

void WanSchedule::set_start(double wall_s) {
  std::lock_guard lock(mu_);
  start_ = wall_s;
}

std::optional<double> WanSchedule::start() const {
  std::lock_guard lock(mu_);
  return start_;
}

void WanSchedule::replace_faults(std::vector<Fault> faults) {
  std::lock_guard lock(mu_);
  faults_ = std::move(faults);
}

std::vector<WanSchedule::Fault> WanSchedule::faults() const {
  std::lock_guard lock(mu_);
  return faults_;
}

std::vector<const WanSchedule::Fault*> WanSchedule::holding(double now) const {
  std::vector<const Fault*> out;
  if (!start_) return out;
  const double t = now - *start_;
  for (const auto& f : faults_)
    if (f.from_s <= t && t < f.to_s) out.push_back(&f);
  return out;
}

bool WanSchedule::cut_off(std::string_view site, double now) const {
  std::lock_guard lock(mu_);
  for (const Fault* f : holding(now))
    if (f->kind == Fault::Kind::Partition && names(f->sites, site)) return true;
  return false;
}

bool WanSchedule::partitioned(std::string_view a, std::string_view b, double now) const {
  std::lock_guard lock(mu_);
  for (const Fault* f : holding(now))
    if (f->kind == Fault::Kind::Partition && names(f->sites, a) != names(f->sites, b)) return true;
  return false;
}

WanLink WanSchedule::link(std::string_view a, std::string_view b, double now) const {
  const auto key = a < b ? std::pair{std::string(a), std::string(b)} : std::pair{std::string(b), std::string(a)};
  const auto it = pairs_.find(key);
  WanLink link = it == pairs_.end() ? default_link_ : it->second;
  std::lock_guard lock(mu_);
  std::optional<double> bandwidth;
  for (const Fault* f : holding(now)) {
    if (!touches(*f, a, b)) continue;
    if (f->kind == Fault::Kind::Bandwidth) bandwidth = std::min(bandwidth.value_or(f->bandwidth_mbps), f->bandwidth_mbps);
    if (f->kind == Fault::Kind::Latency) link.latency_ms += f->latency_ms;
  }
  if (bandwidth) link.bandwidth_mbps = *bandwidth;
  return link;
}

}  // namespace meridian
