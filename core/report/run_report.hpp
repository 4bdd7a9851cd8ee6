#pragma once
// `meridian report RUN_DIR`: what people look at instead of JSON. Reads a run directory
// (metrics.jsonl, events.jsonl, summary.json: a one-site run or a job's merged files) and writes
// SVG plots -- training and validation loss against tokens and against wall time for every site
// (and a baseline run's, dashed, when given), compute utilization over time, notable events marked
// on the time axis -- and an index.html that shows them with the summary and, with a baseline,
// how soon the run reached the baseline's final validation loss.
#include <filesystem>
#include <optional>
#include <vector>

namespace meridian {

// With a baseline: when the run reached the loss the baseline ended at. The baseline's final
// validation loss (the mean over its sites), the seconds it took to get there (its last
// evaluation, from its start) and the seconds the run took (the first evaluation at or below it,
// interpolated between evaluations, on the last of its sites to get there); no run_s when it never did.
struct TimeToLoss {
  double target = 0;
  double baseline_s = 0;
  std::optional<double> run_s;
};

struct ReportFiles {
  std::filesystem::path index;
  std::vector<std::filesystem::path> plots;
  std::optional<TimeToLoss> time_to_baseline_loss;
};

// The first x at which a curve of (x, loss) points, in x order, is at or below `target`,
// linearly interpolated between the point above it and the one that reaches it; nullopt if never.
std::optional<double> first_reach(const std::vector<std::pair<double, double>>& curve, double target);

// Error(Io) when run_dir has no metrics.jsonl or out_dir cannot be written. Lines that are not
// JSON (a run still being written) are skipped.
ReportFiles write_report(const std::filesystem::path& run_dir, const std::optional<std::filesystem::path>& baseline,
                         const std::filesystem::path& out_dir);

}  // namespace meridian
