#include "sites/site/ops_protocol.hpp"

#include <cmath>

#include "core/util/constant_time.hpp"

namespace meridian {
namespace {

constexpr OpsCommand kAll[] = {OpsCommand::Status,     OpsCommand::Events,     OpsCommand::Checkpoints,
                               OpsCommand::Evict,      OpsCommand::Checkpoint, OpsCommand::SetLr,
                               OpsCommand::Rollback,   OpsCommand::Drain,      OpsCommand::Resume,
                               OpsCommand::PauseOuter, OpsCommand::ResumeOuter, OpsCommand::Wan,
                               OpsCommand::WanAddFault, OpsCommand::WanClearFaults};

std::string known_commands() {
  std::string out;
  for (auto c : kAll) out += (out.empty() ? "" : ", ") + std::string(to_string(c));
  return out;
}

// A positive finite number at `key`, or the sentence saying why not.
std::variant<double, std::string> positive(const nlohmann::json& j, const char* key, std::string_view command) {
  const auto it = j.find(key);
  if (it == j.end()) return std::string(command) + ": missing \"" + key + "\" (a number > 0)";
  if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() <= 0)
    return std::string(command) + ": \"" + key + "\" must be a number > 0, found " + it->dump();
  return it->get<double>();
}

// A time: seconds from the job's start as a number or text, or "+N" (from now); checked by the agent.
std::optional<std::string> time_field(const nlohmann::json& j, const char* key, std::string& out) {
  const auto it = j.find(key);
  if (it == j.end()) return std::string("wan-add-fault: missing \"") + key + "\" (seconds from the job's start, or \"+N\")";
  if (it->is_number()) out = it->dump();
  else if (it->is_string()) out = it->get<std::string>();
  else return std::string("wan-add-fault: \"") + key + "\" must be a number or a string, found " + it->dump();
  return std::nullopt;
}

std::optional<std::string> number_field(const nlohmann::json& j, const char* key, std::optional<double>& out) {
  const auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  if (!it->is_number()) return std::string("wan-add-fault: \"") + key + "\" must be a number, found " + it->dump();
  out = it->get<double>();
  return std::nullopt;
}

std::optional<std::string> parse_fault_fields(const nlohmann::json& j, OpsRequest& r) {
  const auto kind = j.find("kind");
  if (kind == j.end() || !kind->is_string()) return std::string("wan-add-fault: missing \"kind\" (a string)");
  r.kind = kind->get<std::string>();
  const auto sites = j.find("sites");
  if (sites == j.end() || !sites->is_array() || sites->empty() || sites->size() > 1024)
    return std::string("wan-add-fault: \"sites\" must be a non-empty array of site names");
  for (const auto& s : *sites) {
    if (!s.is_string()) return "wan-add-fault: \"sites\" must hold strings, found " + s.dump();
    r.sites.push_back(s.get<std::string>());
  }
  if (auto e = time_field(j, "from", r.from_time)) return e;
  if (auto e = time_field(j, "to", r.to_time)) return e;
  if (auto e = number_field(j, "bandwidth_mbps", r.bandwidth_mbps)) return e;
  if (auto e = number_field(j, "latency_ms", r.latency_ms)) return e;
  if (const auto pair = j.find("pair"); pair != j.end()) {
    if (!pair->is_boolean()) return "wan-add-fault: \"pair\" must be true or false, found " + pair->dump();
    r.pair = pair->get<bool>();
  }
  return std::nullopt;
}

}  // namespace

std::string_view to_string(OpsCommand c) {
  switch (c) {
    case OpsCommand::Status: return "status";
    case OpsCommand::Events: return "events";
    case OpsCommand::Checkpoints: return "checkpoints";
    case OpsCommand::Evict: return "evict";
    case OpsCommand::Checkpoint: return "checkpoint";
    case OpsCommand::SetLr: return "set-lr";
    case OpsCommand::Rollback: return "rollback";
    case OpsCommand::Drain: return "drain";
    case OpsCommand::Resume: return "resume";
    case OpsCommand::PauseOuter: return "pause-outer";
    case OpsCommand::ResumeOuter: return "resume-outer";
    case OpsCommand::Wan: return "wan";
    case OpsCommand::WanAddFault: return "wan-add-fault";
    case OpsCommand::WanClearFaults: return "wan-clear-faults";
  }
  return "?";
}

bool changes_state(OpsCommand c) {
  return c != OpsCommand::Status && c != OpsCommand::Events && c != OpsCommand::Checkpoints &&
         c != OpsCommand::Wan;
}

std::variant<std::optional<std::int64_t>, std::string> rollback_version(std::string_view to) {
  if (to.empty() || to[0] != 'v' || to.find_first_of("/.") != std::string_view::npos) return std::nullopt;
  const auto digits = to.substr(1);
  if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string_view::npos)
    return "rollback: \"" + std::string(to) + "\" is no version: expected v<N> with N a version number, e.g. v12 (a checkpoint file named like this: ./" +
           std::string(to) + ")";
  return std::stoll(std::string(digits));
}

bool token_matches(std::string_view expected, std::string_view given) {
  return !expected.empty() && equal_in_constant_time(expected, given);
}

std::variant<OpsRequest, std::string> parse_ops_request(std::string_view text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return std::string("malformed request: not JSON");
  if (!j.is_object()) return std::string("malformed request: expected a JSON object, found ") + j.type_name();
  const auto command = j.find("command");
  if (command == j.end() || !command->is_string()) return std::string("malformed request: missing \"command\" (a string)");
  OpsRequest r;
  bool found = false;
  for (auto c : kAll)
    if (to_string(c) == command->get<std::string>()) r.command = c, found = true;
  if (!found) return "unknown command " + command->dump() + " (expected one of " + known_commands() + ")";
  if (const auto t = j.find("token"); t != j.end()) {
    if (!t->is_string()) return std::string("malformed request: \"token\" must be a string");
    r.token = t->get<std::string>();
  }
  const std::string_view name = to_string(r.command);
  switch (r.command) {
    case OpsCommand::Evict: {
      const auto id = j.find("replica");
      if (id == j.end() || !id->is_number_integer() || id->get<std::int64_t>() < 0 || id->get<std::int64_t>() > 1 << 20)
        return std::string("evict: \"replica\" must be a replica id (an integer >= 0)");
      r.replica = id->get<int>();
      break;
    }
    case OpsCommand::SetLr: {
      auto v = positive(j, "scale", name);
      if (auto* e = std::get_if<std::string>(&v)) return *e;
      r.scale = std::get<double>(v);
      break;
    }
    case OpsCommand::Rollback: {
      const auto to = j.find("to");
      if (to == j.end() || !to->is_string() || to->get<std::string>().empty())
        return std::string("rollback: \"to\" must name a checkpoint (a file, or a step) or a version (v<N>)");
      r.to = to->get<std::string>();
      auto version = rollback_version(r.to);
      if (auto* e = std::get_if<std::string>(&version)) return *e;
      r.version = std::get<std::optional<std::int64_t>>(version);
      if (j.contains("lr_scale")) {
        auto v = positive(j, "lr_scale", name);
        if (auto* e = std::get_if<std::string>(&v)) return *e;
        r.lr_scale = std::get<double>(v);
      }
      break;
    }
    case OpsCommand::Events: {
      if (const auto s = j.find("since"); s != j.end()) {
        if (!s->is_number_integer() || s->get<std::int64_t>() < 0)
          return std::string("events: \"since\" must be a byte offset (an integer >= 0)");
        r.since = s->get<std::int64_t>();
      }
      break;
    }
    case OpsCommand::WanAddFault: {
      if (auto problem = parse_fault_fields(j, r)) return *problem;
      break;
    }
    default: break;
  }
  return r;
}

nlohmann::json to_json(const OpsRequest& r) {
  nlohmann::json j = {{"command", to_string(r.command)}};
  if (!r.token.empty()) j["token"] = r.token;
  if (r.command == OpsCommand::Evict) j["replica"] = r.replica;
  if (r.command == OpsCommand::SetLr) j["scale"] = r.scale;
  if (r.command == OpsCommand::Rollback) j["to"] = r.to;
  if (r.lr_scale) j["lr_scale"] = *r.lr_scale;
  if (r.command == OpsCommand::Events) j["since"] = r.since;
  if (r.command == OpsCommand::WanAddFault) {
    j.update({{"kind", r.kind}, {"sites", r.sites}, {"from", r.from_time}, {"to", r.to_time}});
    if (r.bandwidth_mbps) j["bandwidth_mbps"] = *r.bandwidth_mbps;
    if (r.latency_ms) j["latency_ms"] = *r.latency_ms;
    if (r.pair) j["pair"] = true;
  }
  return j;
}

}  // namespace meridian
