#include "sites/site/ops_protocol.hpp"

#include <cmath>

namespace meridian {
namespace {

constexpr OpsCommand kAll[] = {OpsCommand::Status,     OpsCommand::Events, OpsCommand::Checkpoints, OpsCommand::Evict,
                               OpsCommand::Checkpoint, OpsCommand::SetLr,  OpsCommand::Rollback};

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
  }
  return "?";
}

bool changes_state(OpsCommand c) {
  return c == OpsCommand::Evict || c == OpsCommand::Checkpoint || c == OpsCommand::SetLr || c == OpsCommand::Rollback;
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
  if (expected.empty()) return false;
  unsigned char differ = expected.size() == given.size() ? 0 : 1;
  for (std::size_t i = 0; i < expected.size(); ++i)
    differ |= static_cast<unsigned char>(expected[i] ^ (i < given.size() ? given[i] : 0));
  return differ == 0;
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
  return j;
}

}  // namespace meridian
