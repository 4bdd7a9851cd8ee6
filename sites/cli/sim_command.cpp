// `meridian sim FILE [--out DIR] [--set k=v]...`: predicts how the job would run at the size its
// [sim] section describes (sites of thousands of GPUs, the [wan] links, failures), under each
// algorithm it compares, on a virtual clock. Nothing is trained; the same file drives real runs.
#include <cstdio>
#include <string>
#include <vector>

#include "core/config/job_config.hpp"
#include "sim/report/comparison.hpp"
#include "sim/report/sim_run.hpp"
#include "sites/cli/commands.hpp"

namespace meridian::cli {

Action add_sim_command(CLI::App& app) {
  struct Options {
    std::string config;
    std::string out;
    std::vector<std::string> overrides;
  };
  auto opts = std::make_shared<Options>();
  app.add_option("file", opts->config, "job file (TOML), with an optional [sim] section")->required();
  app.add_option("--out", opts->out, "folder for sim.json, comparison.md and the timelines (default <run_dir>/sim)");
  app.add_option("--set", opts->overrides, "override a config key: --set sim.days=30 (repeatable)");
  return [opts] {
    const JobConfig job = load_job_config(opts->config, opts->overrides);
    const auto run = sim::run_sim(job);
    const std::filesystem::path dir = opts->out.empty() ? job.job.run_dir / "sim" : std::filesystem::path(opts->out);
    sim::write_sim(run, job, dir);
    std::printf("%s", sim::comparison_table(run.results).c_str());
    double total = 0;
    for (double s : run.seconds) total += s;
    std::printf("\nsimulated %zu algorithm(s) in %.2f s; wrote %s\n", run.results.size(), total, dir.string().c_str());
    return 0;
  };
}

}  // namespace meridian::cli
