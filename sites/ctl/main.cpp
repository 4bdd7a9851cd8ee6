// meridianctl: an operator's handle on one running site. Exit codes: 0 done, 1 refused or failed
// (the agent's sentence is printed), 2 bad usage.
//
//   meridianctl --config FILE --site NAME [--token-file F] [--json] COMMAND
//     status | events [--follow] [--count N] | checkpoints | evict REPLICA | checkpoint
//     | set-lr SCALE | rollback --to CHECKPOINT|STEP|vVERSION [--lr-scale X] | drain | resume
//     | pause-outer | resume-outer
//     | wan | wan add-fault --kind K --sites A,B --from T1 --to T2 [--bandwidth-mbps X] [--latency-ms Y] [--pair]
//     | wan clear-faults
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/config/job_config.hpp"
#include "core/io/secret_file.hpp"
#include "core/util/error.hpp"
#include "sim/emulator/operator_faults.hpp"
#include "sites/ctl/ops_client.hpp"
#include "sites/site/ops_protocol.hpp"
#include "sites/site/ops_token.hpp"

using nlohmann::json;
using namespace meridian;

namespace {

std::string agent_endpoint(const JobConfig& config, const std::string& site) {
  const auto path = site_run_dir(config, site) / "ops.json";
  std::ifstream in(path);
  const auto j = json::parse(in, nullptr, false);
  if (!in || j.is_discarded() || !j.contains("endpoint") || !j["endpoint"].is_string())
    throw make_error(ErrorKind::Io, "no running agent for site '", site, "': ", path.string(),
                     " is missing or unreadable (start the site first)");
  return j["endpoint"].get<std::string>();
}

int print_reply(const json& reply, bool as_json, OpsCommand command) {
  if (!reply.value("ok", false)) {
    std::fprintf(stderr, "meridianctl: %s\n", reply.value("error", std::string("failed")).c_str());
    return 1;
  }
  if (as_json) std::printf("%s\n", reply.dump(2).c_str());
  else if (command == OpsCommand::Status) std::printf("%s", status_table(reply).c_str());
  else if (command == OpsCommand::Wan) std::printf("%s", wan_table(reply).c_str());
  else if (command == OpsCommand::Checkpoints)
    for (const auto& c : reply["checkpoints"])
      std::printf("%10lld  %s  %s\n", c["step"].get<long long>(), c.value("verified", false) ? "ok      " : "CORRUPT ",
                  c.value("error", c.value("path", std::string())).c_str());
  else {
    auto rest = reply;
    rest.erase("ok");
    std::printf("ok %s\n", rest.dump().c_str());
  }
  return 0;
}

// What the command line asks for, as parsed.
struct Invocation {
  std::string config_path, site, token_file;
  bool as_json = false, follow = false;
  int timeout_ms = 10000, count = 0;
  double lr_scale = 0, bandwidth = 0, latency = 0;
  std::string sites;  // wan add-fault --sites, comma-separated
  OpsRequest request;
};

struct Subcommands {
  CLI::App *status, *events, *checkpoints, *evict, *checkpoint, *set_lr, *rollback, *drain, *resume, *pause_outer,
      *resume_outer, *wan, *add_fault, *clear_faults;
};

void declare_wan(CLI::App& app, Invocation& in, Subcommands& s) {
  s.wan = app.add_subcommand("wan", "measured RTT and bandwidth per peer, the emulated WAN's faults");
  s.wan->require_subcommand(0, 1);
  s.add_fault = s.wan->add_subcommand("add-fault", "add a fault to the emulated WAN, at every site");
  s.add_fault->add_option("--kind", in.request.kind, "partition | bandwidth | latency")
      ->required()
      ->check(CLI::IsMember({"partition", "bandwidth", "latency"}));
  s.add_fault->add_option("--sites", in.sites, "the sites it hits, comma-separated")->required();
  s.add_fault->add_option("--from", in.request.from_time, "begins: seconds from the job's start, or +N from now")->required();
  s.add_fault->add_option("--to", in.request.to_time, "ends: seconds from the job's start, or +N from now")->required();
  s.add_fault->add_option("--bandwidth-mbps", in.bandwidth, "bandwidth fault: the links' Mbit/s")->check(CLI::PositiveNumber);
  s.add_fault->add_option("--latency-ms", in.latency, "latency fault: one-way ms added")->check(CLI::PositiveNumber);
  s.add_fault->add_flag("--pair", in.request.pair, "bandwidth or latency: only the link between the two --sites");
  s.clear_faults = s.wan->add_subcommand("clear-faults", "remove the operator's faults (not the config's)");
}

Subcommands declare(CLI::App& app, Invocation& in) {
  app.add_option("--config", in.config_path, "the job file")->required();
  app.add_option("--site", in.site, "the site to talk to")->required();
  app.add_option("--token-file", in.token_file,
                 "a file holding the site's ops token, readable by you only (default: MERIDIAN_OPS_TOKEN, then "
                 "[ops] token_file); never the token itself, which `ps` would show to every user");
  app.add_flag("--json", in.as_json, "print the agent's reply as JSON");
  app.add_option("--timeout-ms", in.timeout_ms, "how long to wait for the agent")->check(CLI::Range(1, 600000));
  app.require_subcommand(1);
  app.fallthrough();  // `meridianctl ... checkpoint --token-file F` as well as `--token-file F checkpoint`
  Subcommands s{};
  s.status = app.add_subcommand("status", "members, health, progress, last events");
  s.events = app.add_subcommand("events", "the site's events.jsonl");
  s.events->add_flag("--follow", in.follow, "keep printing new events");
  s.events->add_option("--count", in.count, "with --follow: stop after this many events")->check(CLI::PositiveNumber);
  s.checkpoints = app.add_subcommand("checkpoints", "list and verify the site's checkpoints");
  s.evict = app.add_subcommand("evict", "evict a replica (it is restarted as configured)");
  s.evict->add_option("replica", in.request.replica, "replica id")->required()->check(CLI::NonNegativeNumber);
  s.checkpoint = app.add_subcommand("checkpoint", "write a checkpoint after the current step");
  s.set_lr = app.add_subcommand("set-lr", "set the factor on the scheduled learning rate");
  s.set_lr->add_option("scale", in.request.scale, "factor > 0")->required()->check(CLI::PositiveNumber);
  s.rollback = app.add_subcommand("rollback", "return the site to a checkpoint, or (several sites) to its newest version");
  s.rollback->add_option("--to", in.request.to, "checkpoint file, or its step; or v<N>: version N of a multi-site job")
      ->required();
  s.rollback->add_option("--lr-scale", in.lr_scale, "learning-rate factor from there")->check(CLI::PositiveNumber);
  s.drain = app.add_subcommand("drain", "stop contributing after the current round and leave the job cleanly");
  s.resume = app.add_subcommand("resume", "come back after a drain: register again, catch up, train on");
  s.pause_outer = app.add_subcommand("pause-outer", "train on, but send no deltas and propose no commits");
  s.resume_outer = app.add_subcommand("resume-outer", "send what was trained meanwhile at the next round's end");
  declare_wan(app, in, s);
  return s;
}

// wan add-fault's arguments that CLI11 cannot check; what is wrong with them, if anything.
std::optional<std::string> complete_fault(Invocation& in) {
  OpsRequest& request = in.request;
  request.command = OpsCommand::WanAddFault;
  if (in.bandwidth > 0) request.bandwidth_mbps = in.bandwidth;
  if (in.latency > 0) request.latency_ms = in.latency;
  for (std::size_t at = 0; at <= in.sites.size();) {
    const auto comma = std::min(in.sites.find(',', at), in.sites.size());
    if (comma == at) return "--sites: expected site names separated by commas, found \"" + in.sites + "\"";
    request.sites.push_back(in.sites.substr(at, comma - at));
    at = comma + 1;
  }
  for (const auto& [flag, text] : {std::pair{"--from", request.from_time}, std::pair{"--to", request.to_time}})
    if (const auto t = parse_fault_time(text); std::holds_alternative<std::string>(t))
      return std::string(flag) + ": " + std::get<std::string>(t);
  return std::nullopt;
}

// The request's command and the arguments CLI11 cannot check; what is wrong with them, if anything.
std::optional<std::string> complete(const Subcommands& s, Invocation& in) {
  OpsRequest& request = in.request;
  const std::pair<CLI::App*, OpsCommand> kinds[] = {
      {s.status, OpsCommand::Status},          {s.events, OpsCommand::Events}, {s.checkpoints, OpsCommand::Checkpoints},
      {s.evict, OpsCommand::Evict},            {s.checkpoint, OpsCommand::Checkpoint}, {s.set_lr, OpsCommand::SetLr},
      {s.rollback, OpsCommand::Rollback},      {s.drain, OpsCommand::Drain},   {s.resume, OpsCommand::Resume},
      {s.pause_outer, OpsCommand::PauseOuter}, {s.resume_outer, OpsCommand::ResumeOuter}};
  for (const auto& [sub, kind] : kinds)
    if (sub->parsed()) request.command = kind;
  if (s.rollback->parsed()) {
    if (in.lr_scale > 0) request.lr_scale = in.lr_scale;
    auto version = rollback_version(request.to);
    if (const auto* problem = std::get_if<std::string>(&version)) return *problem;
    request.version = std::get<std::optional<std::int64_t>>(version);
  }
  if (s.wan->parsed()) request.command = OpsCommand::Wan;
  if (s.clear_faults->parsed()) request.command = OpsCommand::WanClearFaults;
  if (s.add_fault->parsed()) return complete_fault(in);
  return std::nullopt;
}

int print_events(const std::string& endpoint, Invocation& in, std::chrono::milliseconds timeout) {
  int printed = 0;
  for (;;) {
    const auto reply = ops_call(endpoint, to_json(in.request), timeout);
    if (!reply.value("ok", false)) return print_reply(reply, in.as_json, in.request.command);
    for (const auto& e : reply["events"]) {
      std::printf("%s\n", e.dump().c_str());
      if (in.follow && in.count > 0 && ++printed >= in.count) return 0;
    }
    std::fflush(stdout);
    in.request.since = reply["next"].get<std::int64_t>();
    if (!in.follow) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

int talk(Invocation& in) {
  try {
    const JobConfig config = load_job_config(in.config_path);
    in.request.token =
        in.token_file.empty() ? ops_token(config) : read_secret_file(in.token_file, "--token-file: the ops token");
    const std::string endpoint = agent_endpoint(config, in.site);
    const auto timeout = std::chrono::milliseconds(in.timeout_ms);
    if (in.request.command == OpsCommand::Events) return print_events(endpoint, in, timeout);
    return print_reply(ops_call(endpoint, to_json(in.request), timeout), in.as_json, in.request.command);
  } catch (const Error& e) {
    std::fprintf(stderr, "meridianctl: %s\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"meridianctl: see and steer one running site"};
  Invocation in;
  const Subcommands subcommands = declare(app, in);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help is no error; every other parse failure is bad usage
  }
  if (const auto problem = complete(subcommands, in)) {
    std::fprintf(stderr, "meridianctl: %s\n", problem->c_str());
    return 2;
  }
  return talk(in);
}
