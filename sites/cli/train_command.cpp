#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/util/clock.hpp"
#include "core/config/job_config.hpp"
#include "core/io/env.hpp"
#include "core/runlog/progress.hpp"
#include "core/runlog/run_log.hpp"
#include "core/train/trainer.hpp"
#include "sites/cli/commands.hpp"

namespace meridian::cli {

Action add_train_command(CLI::App& app) {
  struct Options {
    std::string config;
    std::vector<std::string> overrides;
  };
  auto opts = std::make_shared<Options>();
  app.add_option("--config", opts->config, "job file (TOML)")->required();
  app.add_option("--set", opts->overrides, "override a config key: --set inner.lr=3e-3 (repeatable)");
  return [opts] {
    const JobConfig config = load_job_config(opts->config, opts->overrides);
    require_devices(config);
    RunLog log(config.job.run_dir);
    ProgressPrinter progress(stdout);
    progress.line("meridian train: " + config.job.name + ", " + describe(config.model) + ", run dir " +
                  config.job.run_dir.string());
    const auto& site = config.sites.front();  // a one-process run trains as the job's first site
    Trainer trainer(config, posix_env(), log, &progress, steady_seconds, {}, {site.device, site.precision, site.attention, 0, {}});
    const auto summary = trainer.run();
    std::printf("done: %lld steps, %lld tokens, %.1f s, %.0f tokens/s, final val loss %.4f\n",
                static_cast<long long>(summary.steps), static_cast<long long>(summary.tokens), summary.wall_s,
                summary.tokens_per_s, summary.final_val_loss);
    return 0;
  };
}

}  // namespace meridian::cli
