#pragma once
// `meridian launch`: every site of a job on this machine, the embedded default way to run one.
// Starts a local etcd member when the job has several sites and names no [control] endpoints,
// runs `meridian site` per [[site]] (output in <site dir>/site.log), shows one progress line for
// the whole job, stops everything on Ctrl-C / SIGTERM or when a site fails, and at the end merges
// the sites' metrics, events and summaries into the job's run_dir.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config/job_config.hpp"

namespace meridian {

struct LaunchRun {
  std::filesystem::path config_path;  // absolute
  std::vector<std::string> overrides;  // the user's --set key=value, passed on to every site
  std::filesystem::path program;       // the meridian binary
};

// 0 when every site finished (and <run_dir>/summary.json is written); 1 when a site failed (the
// others are stopped, its log's tail printed); 128 + signal after SIGINT/SIGTERM (every site
// stopped, nothing left running). Error(Io) when etcd or a site cannot be started.
// <run_dir>/launch.json names the pids of etcd and the sites while they run.
int run_launch(const JobConfig& config, const LaunchRun& run);

// The job's summary from its sites' summary.json objects (in [[site]] order): mean and spread of
// final_val_loss, whether every site ended with the same params_hash, the WAN bytes sent against
// what synchronous training would move (fp32 gradients to every peer every step).
nlohmann::json job_summary(const JobConfig& config, const std::vector<nlohmann::json>& sites, double wall_s);

// The lines of every (site, file), ordered by their "time" field (stable: a file's own order is
// kept for equal times). A line without a "site" (the trainer's checkpoint and resume events) gets
// its file's, so the merged file still says where each line came from. Lines that are not JSON
// objects with a numeric time (a torn last line) are dropped.
std::string merge_jsonl_by_time(const std::vector<std::pair<std::string, std::filesystem::path>>& files);

}  // namespace meridian
