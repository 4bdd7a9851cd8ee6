#include "sites/replica/wan_control.hpp"

#include "core/runlog/run_log.hpp"
#include "core/util/error.hpp"
#include "sim/emulator/operator_faults.hpp"
#include "sim/emulator/wan_schedule.hpp"
#include "crosssite/control/etcd_client.hpp"

namespace meridian {
namespace {

// After etcd failed (cut off, or down), before the leader tries again: a failed call can cost
// the leader's pump up to the client's timeout.
constexpr double kRetryAfterS = 2.0;

nlohmann::json list(const std::vector<WanFault>& faults) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& f : faults) out.push_back(to_json(f));
  return out;
}

void put_figure(nlohmann::json& out, const char* name, const std::optional<MeasuredLink::Figure>& f, double scale) {
  if (!f) return;
  const std::string n = name;
  out[n] = f->median * scale;
  out[n + "_min"] = f->min * scale;
  out[n + "_samples"] = f->samples;
  out[n + "_at"] = f->at;
}

}  // namespace

WanControl::WanControl(const JobConfig& config, std::string site, std::shared_ptr<WanSchedule> schedule,
                       EtcdClient& etcd, RunLog& log, std::function<double()> wall_clock)
    : config_faults_(config.wan.faults),
      job_(config.job.name),
      site_(std::move(site)),
      schedule_(std::move(schedule)),
      etcd_(etcd),
      log_(log),
      wall_clock_(std::move(wall_clock)) {}

void WanControl::read_operator_faults(double now) {
  if (now < next_read_) return;
  next_read_ = now + kFaultsReadEveryS;
  std::string text;
  try {
    text = etcd_.get(wan_faults_key(job_)).value_or("");
  } catch (const Error&) {
    next_read_ = now + kRetryAfterS;
    return;
  }
  // Nothing written yet, at the first read: the config's faults run as they are, nothing to log.
  const bool unchanged = read_ ? *read_ == text : text.empty();
  read_ = text;
  if (unchanged) return;
  try {
    operator_faults_ = text.empty() ? std::vector<WanFault>{} : decode_faults(text, wan_faults_key(job_));
  } catch (const Error& e) {
    // Another writer's garbage: the schedule runs on as it was.
    log_.event("wan_faults_unreadable", {{"site", site_}, {"error", e.what()}});
    return;
  }
  schedule_->replace_faults(merged_faults(config_faults_, operator_faults_));
  log_.event("wan_schedule_changed", {{"site", site_}, {"operator_faults", list(operator_faults_)}});
}

void WanControl::tick() {
  const double now = wall_clock_();
  read_operator_faults(now);
  const auto start = schedule_->start();
  if (!start) return;
  const double t = now - *start;
  // Keyed by what they are, not where they sit: a fault cleared while it held ends here, and one
  // that holds on after the list changed around it does not begin twice.
  std::map<std::string, nlohmann::json> holding;
  const auto scan = [&](const std::vector<WanFault>& faults, const char* source) {
    for (const auto& f : faults)
      if (holds(f, t)) holding[source + to_json(f).dump()] = {{"fault", to_json(f)}, {"source", source}};
  };
  scan(config_faults_, "config");
  scan(operator_faults_, "operator");
  const auto note = [&](const char* kind, nlohmann::json fields) {
    fields.update({{"site", site_}, {"job_s", t}});
    log_.event(kind, std::move(fields));
  };
  for (const auto& [key, fields] : holding)
    if (!holding_.contains(key)) note("wan_fault_began", fields);
  for (const auto& [key, fields] : holding_)
    if (!holding.contains(key)) note("wan_fault_ended", fields);
  holding_ = std::move(holding);
}

nlohmann::json WanControl::figures() const {
  nlohmann::json out = {{"config", list(config_faults_)}, {"operator", list(operator_faults_)}};
  if (const auto start = schedule_->start()) out["start"] = *start;
  return out;
}

nlohmann::json to_json(const MeasuredLink::Peer& p) {
  nlohmann::json out = nlohmann::json::object();
  put_figure(out, "rtt_ms", p.rtt_s, 1000);
  put_figure(out, "in_mbps", p.in_mbps, 1);
  put_figure(out, "out_mbps", p.out_mbps, 1);
  return out;
}

}  // namespace meridian
