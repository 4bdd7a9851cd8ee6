#include "sim/emulator/operator_faults.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "core/util/error.hpp"

namespace meridian {
namespace {

using Kind = WanFault::Kind;

std::string number(double v) {
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  return std::string(buf, end);
}

// Job seconds for a time given relative to now or to the job's start.
std::variant<double, std::string> job_seconds(std::string_view text, const char* what, double now_s) {
  auto t = parse_fault_time(text);
  if (auto* e = std::get_if<std::string>(&t)) return std::string(what) + ": " + *e;
  const auto& ft = std::get<FaultTime>(t);
  return ft.relative ? now_s + ft.seconds : ft.seconds;
}

// The figure a kind needs (> 0), or why not; `given` for another kind is refused.
std::optional<std::string> figure(const std::optional<double>& given, bool takes, const char* key, std::string_view kind,
                                  double& out) {
  if (!takes) {
    if (given) return "a " + std::string(kind) + " fault takes no " + key;
    return std::nullopt;
  }
  if (!given) return "a " + std::string(kind) + " fault needs " + key + " (a number > 0)";
  if (!std::isfinite(*given) || *given <= 0) return std::string(key) + " must be a number > 0, found " + number(*given);
  out = *given;
  return std::nullopt;
}

}  // namespace

std::string wan_faults_key(const std::string& job) { return "/meridian/" + job + "/wan/faults"; }

std::variant<FaultTime, std::string> parse_fault_time(std::string_view text) {
  FaultTime t;
  std::string_view digits = text;
  if (!digits.empty() && digits.front() == '+') {
    t.relative = true;
    digits.remove_prefix(1);
  }
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), t.seconds);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || !std::isfinite(t.seconds) ||
      t.seconds < 0)
    return "expected seconds from the job's start (\"30\") or from now (\"+5\"), found \"" + std::string(text) + "\"";
  return t;
}

std::optional<WanFault::Kind> parse_fault_kind(std::string_view text) {
  for (const Kind k : {Kind::Partition, Kind::Bandwidth, Kind::Latency})
    if (to_string(k) == text) return k;
  return std::nullopt;
}

std::variant<WanFault, std::string> resolve_fault(const FaultRequest& request, const JobConfig& job, double now_s) {
  if (!job.wan.emulated())
    return std::string("this job has no [wan] emulation (set a link, a profile or a fault in [wan]): there is no "
                       "emulated link to change");
  WanFault f;
  const auto kind = parse_fault_kind(request.kind);
  if (!kind) return "kind must be \"partition\", \"bandwidth\" or \"latency\", found \"" + request.kind + "\"";
  f.kind = *kind;
  if (request.sites.empty()) return std::string("sites: name at least one site of the job");
  std::set<std::string> seen;
  for (const auto& s : request.sites) {
    if (std::none_of(job.sites.begin(), job.sites.end(), [&](const auto& site) { return site.name == s; })) {
      std::string known;
      for (const auto& site : job.sites) known += (known.empty() ? "" : ", ") + site.name;
      return "sites: \"" + s + "\" is not a site of the job (" + known + ")";
    }
    if (!seen.insert(s).second) return "sites: \"" + s + "\" is named twice";
  }
  f.sites = request.sites;
  if (request.pair && f.kind == Kind::Partition)
    return std::string("pair: a partition cuts its sites off from all others; a pair is for a bandwidth or latency "
                       "fault on the link between two sites");
  if (request.pair && f.sites.size() != 2)
    return "pair: needs exactly 2 sites (the link between them), found " + std::to_string(f.sites.size());
  f.pair = request.pair;
  if (f.kind == Kind::Partition && f.sites.size() == job.sites.size())
    return std::string("sites: a partition must leave some site on the other side, found every site");
  const auto from = job_seconds(request.from, "from", now_s);
  if (auto* e = std::get_if<std::string>(&from)) return *e;
  const auto to = job_seconds(request.to, "to", now_s);
  if (auto* e = std::get_if<std::string>(&to)) return *e;
  f.from_s = std::get<double>(from);
  f.to_s = std::get<double>(to);
  if (f.to_s <= f.from_s) return "to (" + number(f.to_s) + " s) must be after from (" + number(f.from_s) + " s)";
  if (f.to_s <= now_s) return "the fault would end at " + number(f.to_s) + " s, which is past (now: " + number(now_s) + " s)";
  if (f.kind == Kind::Partition && f.from_s < now_s + kMinLeadS)
    return "a partition must begin at least " + number(kMinLeadS) + " s from now (now: " + number(now_s) +
           " s after the job's start, from: " + number(f.from_s) +
           " s): its sites are cut off the control plane when it begins and must have read it before";
  if (f.from_s < now_s - kGraceS)
    return "from (" + number(f.from_s) + " s) is in the past (now: " + number(now_s) + " s after the job's start)";
  if (auto e = figure(request.bandwidth_mbps, f.kind == Kind::Bandwidth, "bandwidth_mbps", request.kind, f.bandwidth_mbps))
    return *e;
  if (auto e = figure(request.latency_ms, f.kind == Kind::Latency, "latency_ms", request.kind, f.latency_ms)) return *e;
  return f;
}

bool holds(const WanFault& f, double t) { return f.from_s <= t && t < f.to_s; }

Cleared clear_faults(const std::vector<WanFault>& faults, double now_s) {
  Cleared out;
  for (const auto& f : faults)
    (f.kind == Kind::Partition && holds(f, now_s) ? out.kept : out.removed).push_back(f);
  return out;
}

std::vector<WanFault> merged_faults(const std::vector<WanFault>& config, const std::vector<WanFault>& operator_faults) {
  std::vector<WanFault> out = config;
  out.insert(out.end(), operator_faults.begin(), operator_faults.end());
  return out;
}

nlohmann::json to_json(const WanFault& f) {
  nlohmann::json j = {{"kind", to_string(f.kind)}, {"sites", f.sites}, {"from_s", f.from_s}, {"to_s", f.to_s}};
  if (f.pair) j["pair"] = true;
  if (f.kind == Kind::Bandwidth) j["bandwidth_mbps"] = f.bandwidth_mbps;
  if (f.kind == Kind::Latency) j["latency_ms"] = f.latency_ms;
  return j;
}

std::string encode_faults(const std::vector<WanFault>& faults) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& f : faults) list.push_back(to_json(f));
  return nlohmann::json{{"faults", list}}.dump();
}

std::vector<WanFault> decode_faults(std::string_view text, std::string_view where) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  const auto bad = [&](const std::string& why) {
    return make_error(ErrorKind::Peer, where, " holds no list of WAN faults: ", why);
  };
  if (j.is_discarded() || !j.is_object() || !j.contains("faults") || !j["faults"].is_array())
    throw bad("expected {\"faults\": [...]}");
  std::vector<WanFault> out;
  for (const auto& e : j["faults"]) {
    const auto num = [&](const char* key) {
      if (!e.contains(key) || !e[key].is_number() || !std::isfinite(e[key].get<double>()) || e[key].get<double>() < 0)
        throw bad(std::string("\"") + key + "\" is not a number >= 0 in " + e.dump());
      return e[key].get<double>();
    };
    if (!e.is_object() || !e.contains("kind") || !e["kind"].is_string() || !parse_fault_kind(e["kind"].get<std::string>()))
      throw bad("an entry without a known kind: " + e.dump());
    WanFault f;
    f.kind = *parse_fault_kind(e["kind"].get<std::string>());
    if (!e.contains("sites") || !e["sites"].is_array()) throw bad("an entry without sites: " + e.dump());
    for (const auto& s : e["sites"]) {
      if (!s.is_string()) throw bad("a site that is not a string: " + e.dump());
      f.sites.push_back(s.get<std::string>());
    }
    f.pair = e.contains("pair") && e["pair"].is_boolean() && e["pair"].get<bool>();
    f.from_s = num("from_s");
    f.to_s = num("to_s");
    if (f.to_s <= f.from_s) throw bad("to_s <= from_s in " + e.dump());
    if (f.kind == Kind::Bandwidth) f.bandwidth_mbps = num("bandwidth_mbps");
    if (f.kind == Kind::Latency) f.latency_ms = num("latency_ms");
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace meridian
