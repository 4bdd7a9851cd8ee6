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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"meridianctl: see and steer one running site"};
  std::string config_path, site, token_file;
  bool as_json = false;
  int timeout_ms = 10000;
  app.add_option("--config", config_path, "the job file")->required();
  app.add_option("--site", site, "the site to talk to")->required();
  app.add_option("--token-file", token_file,
                 "a file holding the site's ops token, readable by you only (default: MERIDIAN_OPS_TOKEN, then "
                 "[ops] token_file); never the token itself, which `ps` would show to every user");
  app.add_flag("--json", as_json, "print the agent's reply as JSON");
  app.add_option("--timeout-ms", timeout_ms, "how long to wait for the agent")->check(CLI::Range(1, 600000));
  app.require_subcommand(1);
  app.fallthrough();  // `meridianctl ... checkpoint --token-file F` as well as `--token-file F checkpoint`
  OpsRequest request;
  bool follow = false;
  int count = 0;
  auto* status = app.add_subcommand("status", "members, health, progress, last events");
  auto* events = app.add_subcommand("events", "the site's events.jsonl");
  events->add_flag("--follow", follow, "keep printing new events");
  events->add_option("--count", count, "with --follow: stop after this many events")->check(CLI::PositiveNumber);
  auto* checkpoints = app.add_subcommand("checkpoints", "list and verify the site's checkpoints");
  auto* evict = app.add_subcommand("evict", "evict a replica (it is restarted as configured)");
  evict->add_option("replica", request.replica, "replica id")->required()->check(CLI::NonNegativeNumber);
  auto* checkpoint = app.add_subcommand("checkpoint", "write a checkpoint after the current step");
  auto* set_lr = app.add_subcommand("set-lr", "set the factor on the scheduled learning rate");
  set_lr->add_option("scale", request.scale, "factor > 0")->required()->check(CLI::PositiveNumber);
  auto* rollback = app.add_subcommand("rollback", "return the site to a checkpoint, or (several sites) to its newest version");
  rollback->add_option("--to", request.to, "checkpoint file, or its step; or v<N>: version N of a multi-site job")
      ->required();
  double lr_scale = 0;
  rollback->add_option("--lr-scale", lr_scale, "learning-rate factor from there")->check(CLI::PositiveNumber);
  auto* drain = app.add_subcommand("drain", "stop contributing after the current round and leave the job cleanly");
  auto* resume = app.add_subcommand("resume", "come back after a drain: register again, catch up, train on");
  auto* pause_outer = app.add_subcommand("pause-outer", "train on, but send no deltas and propose no commits");
  auto* resume_outer = app.add_subcommand("resume-outer", "send what was trained meanwhile at the next round's end");
  auto* wan = app.add_subcommand("wan", "measured RTT and bandwidth per peer, the emulated WAN's faults");
  wan->require_subcommand(0, 1);
  auto* add_fault = wan->add_subcommand("add-fault", "add a fault to the emulated WAN, at every site");
  std::string sites;
  double bandwidth = 0, latency = 0;
  add_fault->add_option("--kind", request.kind, "partition | bandwidth | latency")
      ->required()
      ->check(CLI::IsMember({"partition", "bandwidth", "latency"}));
  add_fault->add_option("--sites", sites, "the sites it hits, comma-separated")->required();
  add_fault->add_option("--from", request.from_time, "begins: seconds from the job's start, or +N from now")->required();
  add_fault->add_option("--to", request.to_time, "ends: seconds from the job's start, or +N from now")->required();
  add_fault->add_option("--bandwidth-mbps", bandwidth, "bandwidth fault: the links' Mbit/s")->check(CLI::PositiveNumber);
  add_fault->add_option("--latency-ms", latency, "latency fault: one-way ms added")->check(CLI::PositiveNumber);
  add_fault->add_flag("--pair", request.pair, "bandwidth or latency: only the link between the two --sites");
  auto* clear_faults = wan->add_subcommand("clear-faults", "remove the operator's faults (not the config's)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help is no error; every other parse failure is bad usage
  }
  const std::pair<CLI::App*, OpsCommand> kinds[] = {
      {status, OpsCommand::Status},         {events, OpsCommand::Events}, {checkpoints, OpsCommand::Checkpoints},
      {evict, OpsCommand::Evict},           {checkpoint, OpsCommand::Checkpoint}, {set_lr, OpsCommand::SetLr},
      {rollback, OpsCommand::Rollback},     {drain, OpsCommand::Drain},   {resume, OpsCommand::Resume},
      {pause_outer, OpsCommand::PauseOuter}, {resume_outer, OpsCommand::ResumeOuter}};
  for (const auto& [sub, kind] : kinds)
    if (sub->parsed()) request.command = kind;
  if (rollback->parsed()) {
    if (lr_scale > 0) request.lr_scale = lr_scale;
    auto version = rollback_version(request.to);
    if (const auto* problem = std::get_if<std::string>(&version)) {
      std::fprintf(stderr, "meridianctl: %s\n", problem->c_str());
      return 2;
    }
    request.version = std::get<std::optional<std::int64_t>>(version);
  }
  if (wan->parsed()) request.command = OpsCommand::Wan;
  if (clear_faults->parsed()) request.command = OpsCommand::WanClearFaults;
  if (add_fault->parsed()) {
    request.command = OpsCommand::WanAddFault;
    if (bandwidth > 0) request.bandwidth_mbps = bandwidth;
    if (latency > 0) request.latency_ms = latency;
    for (std::size_t at = 0; at <= sites.size();) {
      const auto comma = std::min(sites.find(',', at), sites.size());
      if (comma == at) {
        std::fprintf(stderr, "meridianctl: --sites: expected site names separated by commas, found \"%s\"\n", sites.c_str());
        return 2;
      }
      request.sites.push_back(sites.substr(at, comma - at));
      at = comma + 1;
    }
    for (const auto& [flag, text] : {std::pair{"--from", request.from_time}, std::pair{"--to", request.to_time}})
      if (const auto t = parse_fault_time(text); std::holds_alternative<std::string>(t)) {
        std::fprintf(stderr, "meridianctl: %s: %s\n", flag, std::get<std::string>(t).c_str());
        return 2;
      }
  }
  try {
    const JobConfig config = load_job_config(config_path);
    request.token = token_file.empty() ? ops_token(config) : read_secret_file(token_file, "--token-file: the ops token");
    const std::string endpoint = agent_endpoint(config, site);
    const auto timeout = std::chrono::milliseconds(timeout_ms);
    if (request.command != OpsCommand::Events) return print_reply(ops_call(endpoint, to_json(request), timeout), as_json, request.command);
    int printed = 0;
    for (;;) {
      const auto reply = ops_call(endpoint, to_json(request), timeout);
      if (!reply.value("ok", false)) return print_reply(reply, as_json, request.command);
      for (const auto& e : reply["events"]) {
        std::printf("%s\n", e.dump().c_str());
        if (follow && count > 0 && ++printed >= count) return 0;
      }
      std::fflush(stdout);
      request.since = reply["next"].get<std::int64_t>();
      if (!follow) return 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "meridianctl: %s\n", e.what());
    return 1;
  }
}
