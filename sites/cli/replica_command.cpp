#include <string>
#include <vector>

#include "core/util/clock.hpp"
#include "sim/emulator/wan_start.hpp"
#include "core/io/env.hpp"
#include "core/util/error.hpp"
#include "sites/cli/commands.hpp"
#include "sites/site/launcher_env.hpp"
#include "sites/site/store_secret.hpp"
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
  auto* id = app.add_option("--id", opts->id, "replica slot id within the site (default: RANK or SLURM_PROCID)")
                 ->check(CLI::NonNegativeNumber);
  auto* store = app.add_option("--store", opts->store,
                               "the site agent's store, tcp://host:port (default: MASTER_ADDR:MASTER_PORT)");
  app.add_option("--set", opts->overrides, "override a config key (repeatable)");
  return [opts, id, store] {
    // Started by a cluster launcher: the usual variables stand in for the options.
    const auto launch = launcher_environment();
    if (id->count() == 0) {
      if (!launch.rank) throw make_error(ErrorKind::Usage, "--id is required (or RANK / SLURM_PROCID)");
      opts->id = *launch.rank;
    }
    if (store->count() == 0) {
      if (!launch.master_port)
        throw make_error(ErrorKind::Usage, "--store is required (or MASTER_ADDR and MASTER_PORT)");
      opts->store = "tcp://" + launch.master_addr.value_or("127.0.0.1") + ":" + std::to_string(*launch.master_port);
    }
    JobConfig config = config_for_site(load_job_config(opts->config, opts->overrides), opts->site);
    std::string secret = accepted_store_secret(config.job.run_dir, opts->store, std::chrono::seconds(30));
    ReplicaRun run{std::move(config), opts->site, opts->id, opts->store, std::move(secret)};
    return run_replica(run, posix_env(), steady_seconds, wall_clock_s);
  };
}

}  // namespace meridian::cli
