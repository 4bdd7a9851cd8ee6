#include "core/report/run_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/report/svg_plot.hpp"
#include "core/util/error.hpp"

namespace meridian {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Kinds worth a line on the timeline; the rest (commits, checkpoints, joins) would bury them.
const std::set<std::string> kNotable = {
    "divergence_detected", "rollback",        "recovered",         "divergence_gave_up", "lr_spike_injected",
    "replica_exited",      "replica_evicted", "replica_restarted", "sdc_detected",       "delta_refused",
    "control_unreachable", "state_adopted",   "site_stopped",      "site_failed",        "ops_command",
    "catch_up_impossible", "ended_cut_off"};
constexpr std::size_t kMaxMarkers = 40;

std::vector<json> read_lines(const fs::path& path) {
  std::vector<json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto j = json::parse(line, nullptr, false);
    if (j.is_object()) out.push_back(std::move(j));
  }
  return out;
}

// A line's event name; "?" where it has none or something else than text there (a run dir damaged
// by hand or by a disk is read, never thrown on).
std::string event_of(const json& e) {
  return e.contains("event") && e["event"].is_string() ? e["event"].get<std::string>() : "?";
}

struct Run {
  std::vector<json> metrics, events;
  json summary = json::object();
  double t0 = 0;  // the earliest time in the run's metrics and events
};

Run load(const fs::path& dir) {
  if (!fs::exists(dir / "metrics.jsonl"))
    throw make_error(ErrorKind::Io, "no metrics.jsonl in ", dir.string(), " (is it a run directory?)");
  Run r;
  r.metrics = read_lines(dir / "metrics.jsonl");
  r.events = read_lines(dir / "events.jsonl");
  std::ifstream in(dir / "summary.json");
  if (in) {
    auto s = json::parse(in, nullptr, false);
    if (s.is_object()) r.summary = std::move(s);
  }
  r.t0 = INFINITY;
  for (const auto* lines : {&r.metrics, &r.events})
    for (const auto& j : *lines)
      if (j.contains("time") && j["time"].is_number()) r.t0 = std::min(r.t0, j["time"].get<double>());
  if (!std::isfinite(r.t0)) r.t0 = 0;
  return r;
}

// One series per site of `y` against `x` ("time" is taken relative to the run's start).
std::vector<PlotSeries> series_of(const Run& run, const std::string& x, const std::string& y, const std::string& prefix,
                                  bool dashed) {
  std::map<std::string, PlotSeries> by_site;
  for (const auto& m : run.metrics) {
    if (!m.contains(x) || !m.contains(y) || !m[x].is_number() || !m[y].is_number()) continue;
    const std::string site = m.contains("site") && m["site"].is_string() ? m["site"].get<std::string>() : "local";
    auto& s = by_site[site];
    s.name = prefix + site;
    s.dashed = dashed;
    const double xv = m[x].get<double>() - (x == "time" ? run.t0 : 0.0);
    s.points.emplace_back(xv, m[y].get<double>());
  }
  std::vector<PlotSeries> out;
  for (auto& [site, s] : by_site) {
    std::stable_sort(s.points.begin(), s.points.end(), [](auto& a, auto& b) { return a.first < b.first; });
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<PlotMarker> markers_of(const Run& run) {
  std::vector<PlotMarker> out;
  for (const auto& e : run.events) {
    const std::string kind = event_of(e);
    if (!kNotable.count(kind) || !e.contains("time") || !e["time"].is_number()) continue;
    std::string label = kind;
    if (e.contains("site") && e["site"].is_string()) label += " (" + e["site"].get<std::string>() + ")";
    if (e.contains("step") && e["step"].is_number_integer())
      label += " step " + std::to_string(e["step"].get<std::int64_t>());
    const double x = e["time"].get<double>() - run.t0;
    // Events within a second (a detection, its rollback, the recovery) share one line and label.
    if (!out.empty() && x - out.back().x < 1.0) {
      out.back().label += ", " + label;
      continue;
    }
    if (out.size() == kMaxMarkers) break;
    out.push_back({x, label});
  }
  return out;
}

// The model's text as training went ([log] sample_every): a row per `sample` event, in the order
// written, the text as it came (or why there is none).
std::string samples_html(const Run& run) {
  std::string rows;
  for (const auto& e : run.events) {
    if (event_of(e) != "sample" || !e.contains("step") || !e["step"].is_number_integer()) continue;
    const std::string site = e.contains("site") && e["site"].is_string() ? e["site"].get<std::string>() : "local";
    const std::string text = e.contains("text") && e["text"].is_string()     ? e["text"].get<std::string>()
                             : e.contains("error") && e["error"].is_string() ? "(" + e["error"].get<std::string>() + ")"
                                                                             : "";
    rows += "<tr><td>" + std::to_string(e["step"].get<std::int64_t>()) + "</td><td>" + xml_escape(site) +
            "</td><td><pre>" + xml_escape(text) + "</pre></td></tr>\n";
  }
  if (rows.empty()) return "";
  return "<h2>Samples of the model's text</h2>\n<table>\n<tr><td>step</td><td>site</td><td>text</td></tr>\n" + rows +
         "</table>\n";
}

// The mean of the sites' last validation losses, and the time of the last evaluation.
std::optional<std::pair<double, double>> final_val(const std::vector<PlotSeries>& sites) {
  double loss = 0, time = 0;
  int n = 0;
  for (const auto& s : sites) {
    if (s.points.empty()) continue;
    time = std::max(time, s.points.back().first);
    loss += s.points.back().second;
    ++n;
  }
  if (n == 0) return std::nullopt;
  return std::pair{loss / n, time};
}

std::optional<TimeToLoss> time_to_loss(const Run& run, const Run& base) {
  const auto target = final_val(series_of(base, "time", "val_loss", "", false));
  if (!target) return std::nullopt;
  TimeToLoss out{target->first, target->second, std::nullopt};
  double latest = 0;
  const auto sites = series_of(run, "time", "val_loss", "", false);
  for (const auto& s : sites) {
    const auto at = first_reach(s.points, out.target);
    if (!at) return out;
    latest = std::max(latest, *at);
  }
  if (!sites.empty()) out.run_s = latest;
  return out;
}

std::string time_to_loss_html(const TimeToLoss& t) {
  char line[400];
  if (t.run_s)
    std::snprintf(line, sizeof line,
                  "<p>The baseline ended at validation loss %.4f after %.0f s; this run reached it after %.0f s "
                  "(%.2fx the baseline's time).</p>\n",
                  t.target, t.baseline_s, *t.run_s, *t.run_s / t.baseline_s);
  else
    std::snprintf(line, sizeof line,
                  "<p>The baseline ended at validation loss %.4f after %.0f s; this run never reached it.</p>\n",
                  t.target, t.baseline_s);
  return line;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw make_error(ErrorKind::Io, "cannot write ", path.string());
}

std::string summary_rows(const json& summary) {
  std::string rows;
  for (const auto& [key, value] : summary.items()) {
    if (value.is_structured()) continue;
    rows += "<tr><td>" + xml_escape(key) + "</td><td>" + xml_escape(value.is_string() ? value.get<std::string>() : value.dump()) +
            "</td></tr>\n";
  }
  return rows;
}

}  // namespace

std::optional<double> first_reach(const std::vector<std::pair<double, double>>& curve, double target) {
  for (std::size_t i = 0; i < curve.size(); ++i) {
    const auto [x, y] = curve[i];
    if (y > target) continue;
    if (i == 0) return x;
    const auto [x0, y0] = curve[i - 1];
    return x0 + (x - x0) * (y0 - target) / (y0 - y);  // y0 > target >= y
  }
  return std::nullopt;
}

ReportFiles write_report(const fs::path& run_dir, const std::optional<fs::path>& baseline, const fs::path& out_dir) {
  const Run run = load(run_dir);
  std::optional<Run> base;
  if (baseline) base = load(*baseline);
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw make_error(ErrorKind::Io, "cannot create ", out_dir.string(), ": ", ec.message());

  const auto with_baseline = [&](const std::string& x, const std::string& y) {
    auto s = series_of(run, x, y, "", false);
    if (base)
      for (auto& b : series_of(*base, x, y, "baseline ", true)) s.push_back(std::move(b));
    return s;
  };
  const auto markers = markers_of(run);
  struct Plot {
    const char* file;
    PlotSpec spec;
    std::vector<PlotSeries> series;
    std::vector<PlotMarker> markers;
  };
  const Plot plots[] = {
      {"loss_tokens.svg", {"Training loss against tokens", "tokens (all sites)", "loss"}, with_baseline("tokens", "loss"), {}},
      {"loss_time.svg", {"Training loss against wall time (events marked)", "seconds since start", "loss"},
       with_baseline("time", "loss"), markers},
      {"val_loss_tokens.svg", {"Validation loss against tokens", "tokens (all sites)", "validation loss"},
       with_baseline("tokens", "val_loss"), {}},
      {"val_loss_time.svg", {"Validation loss against wall time", "seconds since start", "validation loss"},
       with_baseline("time", "val_loss"), {}},
      {"utilization.svg", {"Compute utilization over time (share of wall time in training steps)", "seconds since start",
                           "utilization"}, series_of(run, "time", "utilization", "", false), markers},
  };
  ReportFiles files;
  if (base) files.time_to_baseline_loss = time_to_loss(run, *base);
  std::string images;
  for (const auto& p : plots) {
    write_text(out_dir / p.file, svg_line_plot(p.spec, p.series, p.markers));
    files.plots.push_back(out_dir / p.file);
    images += "<h2>" + xml_escape(p.spec.title) + "</h2>\n<img src=\"" + p.file + "\" alt=\"" + xml_escape(p.spec.title) + "\">\n";
  }
  std::map<std::string, int> counts;
  for (const auto& e : run.events) ++counts[event_of(e)];
  std::string event_rows;
  for (const auto& [kind, n] : counts) event_rows += "<tr><td>" + xml_escape(kind) + "</td><td>" + std::to_string(n) + "</td></tr>\n";
  std::string marker_rows;
  for (const auto& m : markers)
    marker_rows += "<tr><td>" + std::to_string(static_cast<long long>(std::lround(m.x))) + " s</td><td>" +
                   xml_escape(m.label) + "</td></tr>\n";
  const std::string html =
      "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>meridian report: " + xml_escape(run_dir.string()) +
      "</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:1000px}table{border-collapse:collapse}"
      "td{border:1px solid #ccc;padding:2px 8px}img{max-width:100%;border:1px solid #ddd}</style></head><body>\n"
      "<h1>meridian report</h1>\n<p>Run: <code>" +
      xml_escape(fs::absolute(run_dir).string()) + "</code>" +
      (baseline ? "; baseline (dashed): <code>" + xml_escape(fs::absolute(*baseline).string()) + "</code>" : "") +
      "</p>\n" + (files.time_to_baseline_loss ? time_to_loss_html(*files.time_to_baseline_loss) : "") +
      "<h2>Summary</h2>\n<table>\n" + summary_rows(run.summary) + "</table>\n" + images + samples_html(run) +
      "<h2>Events on the timeline</h2>\n<table>\n" + marker_rows + "</table>\n<h2>Events by kind</h2>\n<table>\n" +
      event_rows + "</table>\n</body></html>\n";
  files.index = out_dir / "index.html";
  write_text(files.index, html);
  return files;
}

}  // namespace meridian
