// `meridian validate FILE [--set k=v]...`: checks a job file and its data without running anything,
// so a multi-site job can be vetted on one machine before it is launched on many. A data problem is
// an Error(Data) from check_job_data, reported by main like any other.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/config/job_config.hpp"
#include "core/model/param_layout.hpp"
#include "core/train/init_from.hpp"
#include "core/train/job_data.hpp"
#include "core/util/error.hpp"
#include "sites/cli/commands.hpp"
#include "sites/keys/etcd_keys.hpp"
#include "sites/keys/link_keys.hpp"
#include "sites/site/ops_token.hpp"

namespace meridian::cli {

namespace {

// The CURVE secret keys a host holds: the named site's, which must be there; without a site, every
// site's that is here (a host holds its own only), and at least one. Each must be its owner's
// alone and the key its site's entry lists.
void check_link_keys(const JobConfig& config, const std::string& site) {
  if (!site.empty() && std::none_of(config.sites.begin(), config.sites.end(), [&](const auto& s) { return s.name == site; }))
    throw make_error(ErrorKind::Config, "--site ", site, ": the job has no [[site]] of that name");
  if (!config.transport.link_key_file) return;
  if (!site.empty()) {
    link_curve(config, site);
    return;
  }
  int found = 0;
  for (const auto& s : config.sites) {
    if (!std::filesystem::exists(link_key_file(config, s.name))) continue;
    link_curve(config, s.name);
    ++found;
  }
  if (found == 0)
    throw make_error(ErrorKind::Config, "[transport] link_key_file ", config.transport.link_key_file->string(),
                     ": no site's secret key is on this host (`meridian keys` writes them; --site names the one "
                     "this host runs)");
}

// The etcd secrets of the sites this host runs (as for the CURVE keys above): the certificates
// there, each private key and password its owner's alone.
void check_etcd_keys(const JobConfig& config, const std::string& site) {
  const auto& secret = config.control.key_file ? config.control.key_file : config.control.password_file;
  if (!secret) return;
  for (const auto& s : config.sites)
    if (s.name == site || (site.empty() && std::filesystem::exists(site_path(*secret, s.name)))) etcd_options(config, s.name);
}

}  // namespace

Action add_validate_command(CLI::App& app) {
  struct Options {
    std::string config;
    std::vector<std::string> overrides;
    std::string site;
  };
  auto opts = std::make_shared<Options>();
  app.add_option("file", opts->config, "job file (TOML)")->required();
  app.add_option("--set", opts->overrides, "override a config key: --set inner.lr=3e-3 (repeatable)");
  app.add_option("--site", opts->site, "the site this host runs: its secret key file must be there (CURVE)");
  return [opts] {
    auto result = try_load_job_config(opts->config, opts->overrides);
    if (const auto* config = std::get_if<JobConfig>(&result)) {
      // The data too, as a replica would load it at start-up: a missing, short or malformed file
      // fails here rather than in every replica of a launched job.
      check_job_data(*config);
      if (config->model_init_from) check_init_from(*config->model_init_from, config->model);
      ops_token(*config);  // a token file that is missing or open to other users fails here too
      check_link_keys(*config, opts->site);
      check_etcd_keys(*config, opts->site);
      if (!config->derived.empty()) {
        std::fputs("# Derived from the job's shape (the file leaves them out; a setting there wins):\n", stdout);
        for (const auto& line : config->derived) std::printf("#   %s\n", line.c_str());
      }
      std::printf("# Model: %s parameters (%s)\n", with_commas(ParamLayout::of(config->model).total()).c_str(),
                  describe(config->model).c_str());
      std::fputs(to_toml(*config).c_str(), stdout);
      return 0;
    }
    // Every problem, not just the first: fixing a file one error per run is slow.
    for (const auto& p : std::get<std::vector<ConfigProblem>>(result)) std::fprintf(stderr, "%s\n", p.to_string().c_str());
    return exit_code(ErrorKind::Config);
  };
}

}  // namespace meridian::cli
