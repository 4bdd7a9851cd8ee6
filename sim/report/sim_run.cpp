#include "sim/report/sim_run.hpp"

#include <chrono>
#include <span>

#include "core/io/atomic_write.hpp"
#include "core/util/error.hpp"
#include "sim/des/engine.hpp"
#include "sim/report/comparison.hpp"
#include "sim/report/svg_timeline.hpp"

namespace meridian::sim {

namespace fs = std::filesystem;

SimRun run_sim(const JobConfig& job) {
  SimRun run;
  run.scenario = build_scenario(job);
  std::vector<Algorithm> algorithms = job.sim.algorithms;
  if (algorithms.empty())
    algorithms = {Algorithm::Sync, Algorithm::Diloco, Algorithm::Overlap, Algorithm::Streaming, Algorithm::Async};
  for (Algorithm a : algorithms) {
    const auto t0 = std::chrono::steady_clock::now();
    run.results.push_back(simulate(run.scenario, a));
    run.seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return run;
}

Algorithm job_algorithm(const JobConfig& job) {
  switch (job.outer.algorithm) {
    case JobConfig::Outer::Algorithm::Sync: return Algorithm::Sync;
    case JobConfig::Outer::Algorithm::Streaming: return Algorithm::Streaming;
    case JobConfig::Outer::Algorithm::Diloco: break;
  }
  return job.outer.overlap ? Algorithm::Overlap : Algorithm::Diloco;
}

namespace {

void write_file(const fs::path& path, const std::string& text) {
  write_atomically(posix_env(), path, path.string() + ".tmp",
                   [&](WritableFile& f) { f.append(std::as_bytes(std::span(text.data(), text.size()))); });
}

nlohmann::json scenario_json(const Scenario& sc) {
  nlohmann::json sites = nlohmann::json::array();
  for (const auto& s : sc.sites)
    sites.push_back({{"site", s.name}, {"gpus", s.gpus}, {"step_s", s.step_s}, {"tokens_per_step", s.tokens_per_step}});
  return {{"params", sc.params},         {"delta_bytes", sc.delta_bytes}, {"grad_bytes", sc.grad_bytes},
          {"state_bytes", sc.state_bytes}, {"inner_steps", sc.inner_steps}, {"fragments", sc.fragments},
          {"steps", sc.steps},           {"token_budget", sc.token_budget}, {"horizon_s", sc.horizon_s},
          {"seed", sc.seed},             {"exchange", sc.split_exchange ? "split" : "leader"},
          {"sites", sites}};
}

std::string timeline_csv(const Result& r) {
  constexpr int kBins = 200;
  std::string out = "site,t0_s,t1_s,compute,wait,down,overhead\n";
  char buf[160];
  for (const auto& site : r.sites)
    for (const auto& b : bin_timeline(site, r.wall_s, kBins)) {
      std::snprintf(buf, sizeof buf, ",%.3f,%.3f,%.4f,%.4f,%.4f,%.4f\n", b.t0, b.t1, b.share[0], b.share[1],
                    b.share[2], b.share[3]);
      out += site.name + buf;
    }
  return out;
}

}  // namespace

std::vector<fs::path> write_sim(const SimRun& run, const JobConfig& job, const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw make_error(ErrorKind::Io, "cannot create ", dir.string(), ": ", ec.message());
  std::vector<fs::path> written;
  nlohmann::json results = nlohmann::json::array();
  for (std::size_t i = 0; i < run.results.size(); ++i) {
    const Result& r = run.results[i];
    auto j = to_json(r);
    j["simulated_in_s"] = run.seconds[i];
    results.push_back(j);
    const std::string name(to_string(r.algorithm));
    const std::string title = job.job.name + ": " + name + ", compute utilization " +
                              std::to_string(static_cast<int>(100 * r.compute_utilization + 0.5)) + "%, wall " +
                              human_seconds(r.wall_s);
    written.push_back(dir / ("timeline-" + name + ".svg"));
    write_file(written.back(), svg_timeline(r, title));
    written.push_back(dir / ("timeline-" + name + ".csv"));
    write_file(written.back(), timeline_csv(r));
  }
  const nlohmann::json all = {{"job", job.job.name}, {"source", job.source.string()},
                              {"job_algorithm", to_string(job_algorithm(job))},
                              {"scenario", scenario_json(run.scenario)}, {"results", results}};
  written.push_back(dir / "sim.json");
  write_file(written.back(), all.dump(2) + "\n");
  written.push_back(dir / "comparison.md");
  write_file(written.back(), comparison_table(run.results));
  return written;
}

}  // namespace meridian::sim
