#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/config/job_config.hpp"
#include "core/util/error.hpp"
#include "sites/cli/commands.hpp"
#include "sites/site/agent.hpp"
#include "sites/site/launcher_env.hpp"
#include "sites/site/ops_token.hpp"

namespace meridian::cli {

Action add_site_command(CLI::App& app) {
  struct Options {
    std::string config, site;
    std::vector<std::string> overrides;
    bool attach = false;
  };
  auto opts = std::make_shared<Options>();
  app.add_option("--config", opts->config, "job file (TOML)")->required();
  app.add_option("--site", opts->site, "this site's name")->required();
  app.add_option("--set", opts->overrides, "override a config key: --set inner.lr=3e-3 (repeatable); passed on to the replicas");
  app.add_flag("--attach", opts->attach,
               "replicas are started by a cluster launcher (RANK/WORLD_SIZE or SLURM_PROCID/SLURM_NTASKS, "
               "store at MASTER_ADDR:MASTER_PORT); the agent only hosts the store and decides membership");
  return [opts] {
    JobConfig config = config_for_site(load_job_config(opts->config, opts->overrides), opts->site);
    require_devices(config, opts->site);
    std::string store_address = "127.0.0.1";
    if (opts->attach) {
      const auto launch = launcher_environment();
      if (launch.world_size) config.replicas.count = *launch.world_size;
      if (launch.master_port) config.replicas.store_port = *launch.master_port;
      if (launch.master_addr) store_address = *launch.master_addr;
      if (config.replicas.store_port == 0)
        throw make_error(ErrorKind::Config, "--attach needs a fixed store port: set [replicas] store_port or MASTER_PORT");
    }
    std::error_code ec;
    // Replicas are this same program; /proc/self/exe stays right even when argv[0] was relative.
    const auto program = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) throw make_error(ErrorKind::Io, "cannot find the meridian program (/proc/self/exe): ", ec.message());
    SiteRun run{opts->site, std::filesystem::absolute(opts->config), opts->overrides, program, opts->attach,
                store_address, ops_token(config)};
    return run_site(config, run);
  };
}

}  // namespace meridian::cli
