#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/config/job_config.hpp"
#include "core/util/error.hpp"
#include "sites/cli/commands.hpp"
#include "sites/site/agent.hpp"

namespace meridian::cli {

Action add_site_command(CLI::App& app) {
  struct Options {
    std::string config, site;
    std::vector<std::string> overrides;
  };
  auto opts = std::make_shared<Options>();
  app.add_option("--config", opts->config, "job file (TOML)")->required();
  app.add_option("--site", opts->site, "this site's name")->required();
  app.add_option("--set", opts->overrides, "override a config key: --set inner.lr=3e-3 (repeatable); passed on to the replicas");
  return [opts] {
    const JobConfig config = load_job_config(opts->config, opts->overrides);
    std::error_code ec;
    // Replicas are this same program; /proc/self/exe stays right even when argv[0] was relative.
    const auto program = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) throw make_error(ErrorKind::Io, "cannot find the meridian program (/proc/self/exe): ", ec.message());
    SiteRun run{opts->site, std::filesystem::absolute(opts->config), opts->overrides, program};
    return run_site(config, run);
  };
}

}  // namespace meridian::cli
