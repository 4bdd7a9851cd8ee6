// `meridian launch FILE [--set k=v]...`: every site of a job on this machine, with a local etcd
// member when the job has several sites and names no control plane.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/config/job_config.hpp"
#include "core/train/init_from.hpp"
#include "core/train/job_data.hpp"
#include "core/util/error.hpp"
#include "sites/cli/commands.hpp"
#include "sites/launch/launcher.hpp"

namespace meridian::cli {

Action add_launch_command(CLI::App& app) {
  struct Options {
    std::string config;
    std::vector<std::string> overrides;
  };
  auto opts = std::make_shared<Options>();
  app.add_option("file", opts->config, "job file (TOML)")->required();
  app.add_option("--set", opts->overrides, "override a config key: --set inner.lr=3e-3 (repeatable); passed on to every site");
  return [opts] {
    // Loaded here too, so a broken job file is reported once rather than by every site.
    const JobConfig config = load_job_config(opts->config, opts->overrides);
    require_devices(config);
    // And its data: every replica loads the same files, and a bad one would only show in their logs.
    check_job_data(config);
    if (config.model_init_from) check_init_from(*config.model_init_from, config.model);
    std::error_code ec;
    // Sites are this same program; /proc/self/exe stays right even when argv[0] was relative.
    const auto program = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) throw make_error(ErrorKind::Io, "cannot find the meridian program (/proc/self/exe): ", ec.message());
    return run_launch(config, LaunchRun{std::filesystem::absolute(opts->config), opts->overrides, program});
  };
}

}  // namespace meridian::cli
