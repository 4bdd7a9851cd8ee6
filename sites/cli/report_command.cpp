// `meridian report RUN_DIR [--baseline DIR] [--out DIR]`: plots and an index.html of a run.
#include <cstdio>
#include <optional>
#include <string>

#include "core/report/run_report.hpp"
#include "sites/cli/commands.hpp"

namespace meridian::cli {

Action add_report_command(CLI::App& app) {
  struct Options {
    std::string run_dir, baseline, out;
  };
  auto opts = std::make_shared<Options>();
  app.add_option("run_dir", opts->run_dir, "a run directory (metrics.jsonl, events.jsonl, summary.json)")->required();
  app.add_option("--baseline", opts->baseline, "another run drawn dashed beside it (e.g. the synchronous twin)");
  app.add_option("--out", opts->out, "where the report goes (default RUN_DIR/report)");
  return [opts] {
    const std::filesystem::path run = opts->run_dir;
    const auto out = opts->out.empty() ? run / "report" : std::filesystem::path(opts->out);
    std::optional<std::filesystem::path> baseline;
    if (!opts->baseline.empty()) baseline = opts->baseline;
    const auto files = write_report(run, baseline, out);
    for (const auto& p : files.plots) std::printf("%s\n", p.c_str());
    std::printf("%s\n", files.index.c_str());
    if (const auto& t = files.time_to_baseline_loss) {
      if (t->run_s)
        std::printf("baseline final validation loss %.4f at %.0f s; this run reached it at %.0f s (%.2fx)\n", t->target,
                    t->baseline_s, *t->run_s, *t->run_s / t->baseline_s);
      else
        std::printf("baseline final validation loss %.4f at %.0f s; this run never reached it\n", t->target,
                    t->baseline_s);
    }
    return 0;
  };
}

}  // namespace meridian::cli
