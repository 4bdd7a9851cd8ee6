#include "sites/site/ops_wan.hpp"

#include <charconv>

#include "core/runlog/run_log.hpp"
#include "core/util/error.hpp"
#include "crosssite/control/etcd_client.hpp"
#include "sim/emulator/wan_schedule.hpp"
#include "sim/emulator/wan_start.hpp"
#include "sites/keys/etcd_keys.hpp"
#include "sites/site/ops_protocol.hpp"

namespace meridian {
namespace {

using nlohmann::json;

// Lost races before a change gives up: each is another operator's change landing in between.
constexpr int kMaxAttempts = 8;

json link_json(const WanLink& l) {
  return {{"latency_ms", l.latency_ms}, {"jitter_ms", l.jitter_ms}, {"bandwidth_mbps", l.bandwidth_mbps},
          {"stream_mbps", l.stream_mbps}, {"loss", l.loss}};
}

// The leader's measured figures of a peer with "<figure>_at" (a wall time) made "<figure>_age_s".
json with_ages(const json& measured, double wall_now) {
  json out = json::object();
  if (!measured.is_object()) return out;
  for (const auto& [key, value] : measured.items()) {
    if (!value.is_number()) continue;
    if (key.size() > 3 && key.ends_with("_at")) out[key.substr(0, key.size() - 3) + "_age_s"] = wall_now - value.get<double>();
    else out[key] = value;
  }
  return out;
}

// The operator's faults the leader runs, as published; none when the figures hold none (or garbage).
std::vector<WanFault> published_operator_faults(const json& wan_faults) {
  if (!wan_faults.is_object() || !wan_faults.contains("operator")) return {};
  try {
    return decode_faults(json{{"faults", wan_faults["operator"]}}.dump(), "the leader's figures");
  } catch (const Error&) {
    return {};
  }
}

std::optional<double> job_start(EtcdClient& etcd, const std::string& job) {
  const auto text = etcd.get(wan_start_key(job));
  double start = 0;
  if (!text) return std::nullopt;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), start);
  if (ec != std::errc() || end != text->data() + text->size())
    throw make_error(ErrorKind::Peer, "etcd key ", wan_start_key(job), " holds no start time: ", *text);
  return start;
}

}  // namespace

json wan_report(const JobConfig& config, const std::string& site, const json& leader, double wall_now) {
  const json empty = json::object();
  const json& links = leader.is_object() && leader.contains("links") ? leader["links"] : empty;
  const json& wan_faults = leader.is_object() && leader.contains("wan_faults") ? leader["wan_faults"] : empty;
  const auto operator_faults = published_operator_faults(wan_faults);
  const WanSchedule configured(config);  // no start: no fault holds, the links as configured
  WanSchedule now(config);
  std::optional<double> start;
  if (wan_faults.is_object() && wan_faults.contains("start") && wan_faults["start"].is_number()) {
    start = wan_faults["start"].get<double>();
    now.set_start(*start);
    now.replace_faults(merged_faults(config.wan.faults, operator_faults));
  }
  json out = {{"ok", true}, {"site", site}, {"emulated", config.wan.emulated()}};
  if (start) out.update({{"start", *start}, {"job_s", wall_now - *start}});
  json peers = json::array();
  for (const auto& s : config.sites) {
    if (s.name == site) continue;
    json p = {{"site", s.name}, {"measured", with_ages(links.contains(s.name) ? links[s.name] : empty, wall_now)}};
    if (config.wan.emulated()) {
      const WanLink base = configured.link(site, s.name, wall_now), running = now.link(site, s.name, wall_now);
      const bool apart = now.cut_off(site, wall_now) || now.partitioned(site, s.name, wall_now);
      p.update({{"configured", link_json(running)}, {"partitioned", apart}, {"fault_now", apart || running != base}});
    }
    peers.push_back(std::move(p));
  }
  out["peers"] = std::move(peers);
  json faults = json::array();
  const auto add = [&](const std::vector<WanFault>& list, const char* source) {
    for (const auto& f : list) {
      json j = to_json(f);
      j["source"] = source;
      if (start)
        j.update({{"from_wall", *start + f.from_s}, {"to_wall", *start + f.to_s}, {"holds", holds(f, wall_now - *start)}});
      faults.push_back(std::move(j));
    }
  };
  add(config.wan.faults, "config");
  add(operator_faults, "operator");
  out["faults"] = std::move(faults);
  return out;
}

OpsWan::OpsWan(const JobConfig& config, std::string site, RunLog& log, std::function<double()> wall_clock)
    : config_(config), site_(std::move(site)), log_(log), wall_clock_(std::move(wall_clock)) {}

json OpsWan::change_faults(const Change& change, const std::function<json(double)>& reply) {
  if (!config_.wan.emulated())
    return failure_reply(
        "this job has no [wan] emulation (set a link, a profile or a fault in [wan]): there is no emulated "
        "link to change");
  if (config_.control.endpoints.empty())
    return failure_reply("this site has no [control] endpoints: no etcd to write the change to");
  EtcdOptions options = etcd_options(config_, site_);
  options.timeout = kEtcdTimeout;
  EtcdClient etcd(options);
  const auto start = job_start(etcd, config_.job.name);
  if (!start)
    return failure_reply(
        "the job's emulated WAN has not started yet (no start in etcd): try again once the sites have joined");
  const std::string key = wan_faults_key(config_.job.name);
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    const auto current = etcd.get(key);
    const double now_s = wall_clock_() - *start;
    auto changed = change(current ? decode_faults(*current, key) : std::vector<WanFault>{}, now_s);
    if (auto* refusal = std::get_if<std::string>(&changed)) return failure_reply(*refusal);
    const std::string text = encode_faults(std::get<std::vector<WanFault>>(changed));
    // A swap that won but whose answer was lost reads back as this text (etcd_client.hpp).
    if ((current ? etcd.compare_and_swap(key, *current, text) : etcd.create_if_absent(key, text)) || etcd.get(key) == text) {
      json out = reply(*start);
      out.update({{"ok", true}, {"operator_faults", json::parse(text)["faults"]}, {"job_s", now_s}});
      return out;
    }
  }
  return failure_reply("the operator's fault list changed under this command " + std::to_string(kMaxAttempts) +
                       " times (other operators at work): try again");
}

json OpsWan::add_fault(const FaultRequest& request) {
  WanFault added;
  auto reply = change_faults(
      [&](std::vector<WanFault> faults, double now_s) -> std::variant<std::vector<WanFault>, std::string> {
        auto f = resolve_fault(request, config_, now_s);
        if (auto* refusal = std::get_if<std::string>(&f)) return *refusal;
        added = std::get<WanFault>(f);
        faults.push_back(added);
        return faults;
      },
      [&](double start) {
        return json{{"fault", to_json(added)}, {"from_wall", start + added.from_s}, {"to_wall", start + added.to_s}};
      });
  if (reply.value("ok", false))
    log_.event("wan_fault_added", {{"site", site_}, {"fault", reply["fault"]}, {"from_wall", reply["from_wall"]},
                                   {"to_wall", reply["to_wall"]}});
  return reply;
}

json OpsWan::clear_faults() {
  Cleared cleared;
  auto reply = change_faults(
      [&](const std::vector<WanFault>& faults, double now_s) -> std::variant<std::vector<WanFault>, std::string> {
        cleared = meridian::clear_faults(faults, now_s);
        return cleared.kept;
      },
      [&](double) {
        json out = {{"removed", cleared.removed.size()}, {"kept", cleared.kept.size()}};
        if (!cleared.kept.empty())
          out["note"] = "a partition holding now stays until its end: its sites are cut off etcd and could not read "
                        "that it was lifted";
        return out;
      });
  if (reply.value("ok", false))
    log_.event("wan_faults_cleared", {{"site", site_}, {"removed", reply["removed"]}, {"kept", reply["kept"]}});
  return reply;
}

}  // namespace meridian
