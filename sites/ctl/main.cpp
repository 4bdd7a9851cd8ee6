// meridianctl: an operator's handle on one running site. Exit codes: 0 done, 1 refused or failed
// (the agent's sentence is printed), 2 bad usage.
//
//   meridianctl --config FILE --site NAME [--token T] [--json] COMMAND
//     status | events [--follow] [--count N] | checkpoints | evict REPLICA | checkpoint
//     | set-lr SCALE | rollback --to CHECKPOINT|STEP|vVERSION [--lr-scale X]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/config/job_config.hpp"
#include "core/util/error.hpp"
#include "sites/ctl/ops_client.hpp"
#include "sites/site/ops_protocol.hpp"

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
  std::string config_path, site, token;
  bool as_json = false;
  int timeout_ms = 10000;
  app.add_option("--config", config_path, "the job file")->required();
  app.add_option("--site", site, "the site to talk to")->required();
  app.add_option("--token", token, "the site's ops token (default: MERIDIAN_OPS_TOKEN, then [ops] token)");
  app.add_flag("--json", as_json, "print the agent's reply as JSON");
  app.add_option("--timeout-ms", timeout_ms, "how long to wait for the agent")->check(CLI::Range(1, 600000));
  app.require_subcommand(1);
  app.fallthrough();  // `meridianctl ... checkpoint --token T` as well as `--token T checkpoint`
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help is no error; every other parse failure is bad usage
  }
  const std::pair<CLI::App*, OpsCommand> kinds[] = {
      {status, OpsCommand::Status},         {events, OpsCommand::Events}, {checkpoints, OpsCommand::Checkpoints},
      {evict, OpsCommand::Evict},           {checkpoint, OpsCommand::Checkpoint}, {set_lr, OpsCommand::SetLr},
      {rollback, OpsCommand::Rollback}};
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
  try {
    const JobConfig config = load_job_config(config_path);
    if (token.empty()) {
      const char* env = std::getenv("MERIDIAN_OPS_TOKEN");
      token = env && *env ? env : config.ops.token;
    }
    request.token = token;
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
