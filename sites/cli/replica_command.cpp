#include <chrono>
#include <string>
#include <vector>

#include "core/io/env.hpp"
#include "sites/cli/commands.hpp"
#include "sites/replica/replica_loop.hpp"

namespace meridian::cli {

Action add_replica_command(CLI::App& app) {
  struct Options {
    std::string config, site = "local", store;
    int id = 0;
    std::vector<std::string> overrides;
  };
  auto opts = std::make_shared<Options>();
  app.add_option("--config", opts->config, "job file (TOML)")->required();
  app.add_option("--site", opts->site, "this site's name")->capture_default_str();
  app.add_option("--id", opts->id, "replica slot id within the site")->required()->check(CLI::NonNegativeNumber);
  app.add_option("--store", opts->store, "the site agent's store, tcp://host:port")->required();
  app.add_option("--set", opts->overrides, "override a config key (repeatable)");
  return [opts] {
    ReplicaRun run{load_job_config(opts->config, opts->overrides), opts->site, opts->id, opts->store};
    auto now = [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
    return run_replica(run, posix_env(), now);
  };
}

}  // namespace meridian::cli
