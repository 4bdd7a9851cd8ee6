#pragma once
// `meridian report RUN_DIR`: what people look at instead of JSON. Reads a run directory
// (metrics.jsonl, events.jsonl, summary.json: a one-site run or a job's merged files) and writes
// SVG plots -- training loss against tokens and against wall time for every site (and a
// baseline run's, dashed, when given), compute utilization over time, notable events marked on
// the time axis -- and an index.html that shows them with the summary.
#include <filesystem>
#include <optional>
#include <vector>

namespace meridian {

struct ReportFiles {
  std::filesystem::path index;
  std::vector<std::filesystem::path> plots;
};

// Error(Io) when run_dir has no metrics.jsonl or out_dir cannot be written. Lines that are not
// JSON (a run still being written) are skipped.
ReportFiles write_report(const std::filesystem::path& run_dir, const std::optional<std::filesystem::path>& baseline,
                         const std::filesystem::path& out_dir);

}  // namespace meridian
