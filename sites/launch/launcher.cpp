#include "sites/launch/launcher.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <thread>

#include "core/io/atomic_write.hpp"
#include "core/io/env.hpp"
#include "core/io/secret_file.hpp"
#include "core/io/stop_signals.hpp"
#include "core/util/error.hpp"
#include "core/runlog/run_log.hpp"
#include "sites/keys/link_keys.hpp"
#include "sites/launch/etcd_member.hpp"
#include "sites/launch/site_restarts.hpp"
#include "crosssite/control/etcd_auth.hpp"
#include "crosssite/control/etcd_client.hpp"

namespace meridian {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// What the progress line shows of one site, read by tailing its metrics.jsonl.
struct SiteView {
  fs::path metrics;
  std::uintmax_t offset = 0;  // bytes already read; a partial last line waits for its newline
  std::int64_t step = 0;
  std::int64_t version = 0;
  std::optional<double> loss, val_loss;
  std::deque<std::pair<double, double>> tokens;  // (time, tokens) of recent lines, for tokens/s
};

void read_new_lines(SiteView& v) {
  std::ifstream in(v.metrics, std::ios::binary);
  if (!in) return;
  in.seekg(static_cast<std::streamoff>(v.offset));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto end = text.rfind('\n');
  if (end == std::string::npos) return;
  v.offset += end + 1;
  std::size_t begin = 0;
  while (begin <= end) {
    const auto nl = text.find('\n', begin);
    const json m = json::parse(text.begin() + static_cast<std::ptrdiff_t>(begin),
                               text.begin() + static_cast<std::ptrdiff_t>(nl), nullptr, false);
    begin = nl + 1;
    if (!m.is_object()) continue;
    if (m.contains("step") && m["step"].is_number()) v.step = std::max(v.step, m["step"].get<std::int64_t>());
    if (m.contains("version") && m["version"].is_number()) v.version = m["version"].get<std::int64_t>();
    if (m.contains("loss") && m["loss"].is_number()) v.loss = m["loss"].get<double>();
    if (m.contains("val_loss") && m["val_loss"].is_number()) v.val_loss = m["val_loss"].get<double>();
    if (m.contains("time") && m["time"].is_number() && m.contains("tokens") && m["tokens"].is_number())
      v.tokens.emplace_back(m["time"].get<double>(), m["tokens"].get<double>());
  }
  // Tokens/s over roughly the last 20 s: recent enough to follow the run, long enough to be steady.
  while (v.tokens.size() > 2 && v.tokens.back().first - v.tokens[1].first > 20) v.tokens.pop_front();
}

double tokens_per_s(const SiteView& v) {
  if (v.tokens.size() < 2) return 0;
  const double dt = v.tokens.back().first - v.tokens.front().first;
  return dt > 0 ? (v.tokens.back().second - v.tokens.front().second) / dt : 0;
}

std::string format(const char* fmt, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

std::string stamp(Clock::time_point t0) { return format("[%3.0fs]", seconds_since(t0)); }

std::string human_rate(double r) {
  if (r >= 1e6) return format("%.2fM", r / 1e6);
  if (r >= 1e3) return format("%.1fk", r / 1e3);
  return format("%.0f", r);
}

struct SiteProcess {
  std::string name;
  fs::path dir;
  std::unique_ptr<LoggedChild> child;
  SiteView view;
  std::optional<ExitStatus> exit;
  SiteHistory history;
  Clock::time_point started;
  std::optional<Clock::time_point> restart_at;  // failed, to be started again then
};

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

std::string progress_line(Clock::time_point t0, std::vector<SiteProcess>& sites, int total_steps) {
  std::string line = stamp(t0);
  // Every site's "tokens" counts the job's tokens (all sites advance the one data position), so
  // the job's rate is the sites' mean, not their sum.
  double rate = 0;
  int rates = 0;
  for (std::size_t i = 0; i < sites.size(); ++i) {
    auto& s = sites[i];
    read_new_lines(s.view);
    line += (i == 0 ? " " : " | ") + s.name + ": ";
    if (s.view.step == 0 && !s.view.loss) {
      line += "starting";
      continue;
    }
    line += format("step %lld/%d", static_cast<long long>(s.view.step), total_steps);
    if (s.view.loss) line += format(" loss %.3f", *s.view.loss);
    if (s.view.val_loss) line += format(" val %.3f", *s.view.val_loss);
    line += format(" v%lld", static_cast<long long>(s.view.version));
    if (s.exit) line += " (done)";
    else if (const double r = tokens_per_s(s.view); r > 0) {
      rate += r;
      ++rates;
    }
  }
  return line + " | " + human_rate(rates > 0 ? rate / rates : 0) + " tok/s";
}

void write_file(const fs::path& path, const std::string& text) {
  write_atomically(posix_env(), path, path.string() + ".tmp",
                   [&](WritableFile& f) { f.append(std::as_bytes(std::span(text.data(), text.size()))); });
}

json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw make_error(ErrorKind::Io, "cannot read ", path.string());
  const json j = json::parse(in, nullptr, false);
  if (!j.is_object()) throw make_error(ErrorKind::Io, path.string(), " is not a JSON object");
  return j;
}

void print_table(const json& summary, const std::vector<json>& sites) {
  say(format("  %-12s %9s %12s %7s %12s %14s", "site", "val loss", "tokens", "rounds", "WAN MB sent", "B/param/round"));
  for (const auto& s : sites)
    say(format("  %-12s %9.4f %12lld %7lld %12.3f %14s", s.value("site", "?").c_str(), s.value("final_val_loss", 0.0),
               static_cast<long long>(s.value("tokens", std::int64_t{0})),
               static_cast<long long>(s.value("rounds", std::int64_t{0})), s.value("wan_bytes_sent", 0.0) / 1e6,
               s.contains("bytes_per_param_round") ? format("%.3f", s["bytes_per_param_round"].get<double>()).c_str()
                                                   : "-"));
  if (sites.size() < 2) return;
  say(format("  val loss spread %.4f; same final weights: %s", summary["max_val_loss_spread"].get<double>(),
             summary["same_final_weights"].get<bool>() ? "yes" : "NO"));
  const double sync_mb = summary["sync_bytes_equivalent"].get<double>() / 1e6;
  const double sent_mb = summary["wan_bytes_sent"].get<double>() / 1e6;
  if (summary.value("algorithm", "") == "sync")
    say(format("  WAN traffic %.2f MB: this is the synchronous baseline (fp32 gradients every step)", sent_mb));
  else if (summary["reduction_vs_sync"].is_number())
    say(format("  WAN traffic %.2f MB vs %.2f MB for synchronous fp32 gradients: %.1fx less", sent_mb, sync_mb,
               summary["reduction_vs_sync"].get<double>()));
}

}  // namespace

std::string merge_jsonl_by_time(const std::vector<std::pair<std::string, fs::path>>& files) {
  std::vector<std::pair<double, std::string>> lines;
  for (const auto& [site, file] : files) {
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);) {
      json j = json::parse(line, nullptr, false);
      if (!j.is_object() || !j.contains("time") || !j["time"].is_number()) continue;
      const double time = j["time"].get<double>();
      if (j.contains("site")) {
        lines.emplace_back(time, std::move(line));  // as written: no re-serialisation of its numbers
      } else {
        j["site"] = site;
        lines.emplace_back(time, j.dump());
      }
    }
  }
  std::stable_sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string out;
  for (const auto& [t, line] : lines) out += line + "\n";
  return out;
}

json job_summary(const JobConfig& config, const std::vector<json>& sites, double wall_s) {
  const auto n = static_cast<std::int64_t>(sites.size());
  double loss_sum = 0, loss_min = 0, loss_max = 0, bpr_sum = 0;
  int bpr_count = 0;
  std::int64_t sent = 0, params = 0, steps = 0;
  // Faults, over the whole job: the longest any site went without a new version (the stall a
  // site's death causes), the lowest compute utilization, messages refused or dropped as copies.
  double max_gap = 0, min_utilization = 1;
  std::int64_t refused = 0, duplicates = 0;
  json rejoined = json::object();
  bool same = true;
  for (std::size_t i = 0; i < sites.size(); ++i) {
    const auto& s = sites[i];
    const double loss = s.value("final_val_loss", 0.0);
    loss_sum += loss;
    loss_min = i == 0 ? loss : std::min(loss_min, loss);
    loss_max = i == 0 ? loss : std::max(loss_max, loss);
    if (s.contains("bytes_per_param_round")) {
      bpr_sum += s["bytes_per_param_round"].get<double>();
      ++bpr_count;
    }
    sent += s.value("wan_bytes_sent", std::int64_t{0});
    max_gap = std::max(max_gap, s.value("max_version_gap_s", 0.0));
    min_utilization = std::min(min_utilization, s.value("compute_utilization", 1.0));
    refused += s.value("frames_refused", std::int64_t{0}) + s.value("deltas_screened_out", std::int64_t{0}) +
               s.value("states_refused", std::int64_t{0});
    if (const auto causes = s.find("refused"); causes != s.end() && causes->is_object())
      for (const auto& count : *causes) refused += count.is_number_integer() ? count.get<std::int64_t>() : 0;
    duplicates += s.value("frames_duplicate", std::int64_t{0});
    if (s.contains("rejoined_after_s")) rejoined[s.value("site", std::string())] = s["rejoined_after_s"];
    params = std::max(params, s.value("params", std::int64_t{0}));
    steps = std::max(steps, s.value("steps", std::int64_t{0}));
    same = same && s.value("params_hash", std::string()) == sites[0].value("params_hash", std::string()) &&
           s.contains("params_hash");
  }
  const std::int64_t sync_bytes = 4 * params * steps * n * (n - 1);
  return {{"job", config.job.name},
          {"algorithm", to_string(config.outer.algorithm)},
          {"sites", sites},
          {"wall_s", wall_s},
          {"final_val_loss", n > 0 ? loss_sum / static_cast<double>(n) : 0.0},
          {"max_val_loss_spread", loss_max - loss_min},
          {"same_final_weights", same},
          {"wan_bytes_sent", sent},
          {"bytes_per_param_round", bpr_count > 0 ? json(bpr_sum / bpr_count) : json(nullptr)},
          {"sync_bytes_equivalent", sync_bytes},
          {"max_version_gap_s", max_gap},
          {"min_compute_utilization", min_utilization},
          {"messages_refused", refused},
          {"messages_deduplicated", duplicates},
          {"rejoined_after_s", rejoined},
          {"reduction_vs_sync", sent > 0 ? json(static_cast<double>(sync_bytes) / static_cast<double>(sent))
                                         : json(nullptr)}};
}

namespace {

int replica_count(const JobConfig& config) {
  int replicas = 0;
  for (const auto& s : config.sites) replicas += s.replicas;
  return replicas;
}

// The sites share this machine's cores: OpenMP teams larger than a replica's share spin against
// each other at every barrier, and busy-waiting workers steal cores from the other sites.
std::vector<std::string> site_environment(const JobConfig& config) {
  std::vector<std::string> set;
  if (!std::getenv("OMP_NUM_THREADS"))
    set.push_back("OMP_NUM_THREADS=" + std::to_string(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) /
                                                                      std::max(1, replica_count(config)))));
  if (!std::getenv("OMP_WAIT_POLICY")) set.push_back("OMP_WAIT_POLICY=passive");
  return child_environment(set);
}

// One line of <run_dir>/launch-events.jsonl: what the launcher itself saw happen to a site.
void launch_event(const fs::path& file, const std::string& kind, json fields) {
  fields["time"] = unix_time_now();
  fields["event"] = kind;
  std::ofstream(file, std::ios::app) << fields.dump() << "\n";
}

// The sites' processes of one launch: starting them, watching them, restarting the dead ones
// (site_restarts.hpp) and stopping them all.
class SiteFleet {
 public:
  enum class State { Running, Done, Failed };

  // `pids`: what launch.json says besides the sites (the launcher's pid, etcd's, the endpoints).
  SiteFleet(const JobConfig& config, const LaunchRun& run, std::vector<std::string> overrides,
            std::vector<std::string> env, json pids, Clock::time_point t0)
      : config_(config), run_(run), overrides_(std::move(overrides)), env_(std::move(env)), pids_(std::move(pids)),
        t0_(t0), policy_(site_restart_policy(config)),
        events_(fs::path(config.job.run_dir) / "launch-events.jsonl") {
    std::error_code ec;
    for (const auto& s : config.sites) {
      SiteProcess p;
      p.name = s.name;
      p.dir = site_run_dir(config, s.name);
      fs::create_directories(p.dir, ec);
      if (ec) throw make_error(ErrorKind::Io, "cannot create ", p.dir.string(), ": ", ec.message());
      p.view.metrics = p.dir / "metrics.jsonl";
      // A resumed job appends to the same files: the progress view starts at this launch's lines.
      p.view.offset = fs::exists(p.view.metrics, ec) ? fs::file_size(p.view.metrics, ec) : 0;
      sites_.push_back(std::move(p));
    }
    for (auto& p : sites_) start(p);
    write_pids();
  }

  std::vector<SiteProcess>& sites() { return sites_; }
  const fs::path& events_file() const { return events_; }

  std::vector<LoggedChild*> children() {
    std::vector<LoggedChild*> out;
    for (auto& s : sites_)
      if (s.child) out.push_back(s.child.get());
    return out;
  }

  // Reaps what exited and restarts what is due. Done when every site finished; Failed (after
  // say()ing why) when a site failed for good; Running otherwise.
  State poll() {
    bool all_done = true;
    for (auto& s : sites_) {
      if (s.restart_at && Clock::now() >= *s.restart_at) restart(s);
      if (s.restart_at) {
        all_done = false;
        continue;
      }
      if (s.exit) continue;
      s.exit = s.child->poll();
      if (!s.exit) {
        all_done = false;
        continue;
      }
      if (s.exit->success()) {
        read_new_lines(s.view);
        say(stamp(t0_) + " site " + s.name + " finished" +
            (s.view.val_loss ? format(": val loss %.4f", *s.view.val_loss) : std::string()));
        continue;
      }
      if (!failed(s)) return State::Failed;
      all_done = false;
    }
    return all_done ? State::Done : State::Running;
  }

  // The exit status the launch ends with after Failed: the failed site's when its input was at
  // fault (so a script can tell), 1 otherwise.
  int failure_code() const { return failure_code_; }

 private:
  void start(SiteProcess& p) {
    std::vector<std::string> argv = {run_.program.string(), "site", "--config", run_.config_path.string(),
                                     "--site", p.name};
    for (const auto& o : overrides_) argv.insert(argv.end(), {"--set", o});
    const int restarts = p.history.restarts;
    const std::string header = restarts == 0 ? "--- meridian launch: site " + p.name + " ---"
                                             : "--- meridian launch: site " + p.name + ", restart " +
                                                   std::to_string(restarts) + " ---";
    p.child = std::make_unique<LoggedChild>(argv, env_, p.dir / "site.log", header);
    p.started = Clock::now();
  }

  // Records the failure; schedules a restart (true) or says why the job cannot go on (false).
  bool failed(SiteProcess& s) {
    const auto log = s.dir / "site.log";
    const std::string cause = last_error_line(log);
    const double ran_s = std::chrono::duration<double>(Clock::now() - s.started).count();
    const SiteRestart next = decide_site_restart(*s.exit, s.history, ran_s, policy_);
    s.history.crash_loop = next.crash_loop;
    json fields = {{"site", s.name},   {"exit", describe(*s.exit)}, {"restarts", s.history.restarts},
                   {"ran_s", ran_s},   {"restart", next.restart}};
    if (!cause.empty()) fields["cause"] = cause;
    if (next.restart) fields["restart_in_s"] = next.delay_s;
    else fields["why_not"] = next.why_not;
    launch_event(events_, "site_failed", fields);
    if (next.restart) {
      say(stamp(t0_) + " site " + s.name + " failed (" + describe(*s.exit) + "); restarting it in " +
          format("%.1f s", next.delay_s) + " (restart " + std::to_string(s.history.restarts + 1) + " of at most " +
          std::to_string(policy_.max_restarts) + ")");
      s.restart_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(next.delay_s));
      return true;
    }
    say(stamp(t0_) + " site " + s.name + " failed (" + describe(*s.exit) + "): " + next.why_not +
        "; stopping the others");
    if (!cause.empty()) say("meridian launch: site " + s.name + ": " + cause);
    say("meridian launch: the end of " + log.string() + " (its replicas log to replica-<id>.log beside it):");
    std::printf("%s", tail_lines(log, 20).c_str());
    std::fflush(stdout);
    failure_code_ = s.exit->permanent() ? s.exit->code : 1;
    return false;
  }

  void restart(SiteProcess& s) {
    s.restart_at.reset();
    s.exit.reset();
    s.history.restarts += 1;
    start(s);
    write_pids();
    launch_event(events_, "site_restarted", {{"site", s.name}, {"restart", s.history.restarts}, {"pid", s.child->pid()}});
    say(stamp(t0_) + " site " + s.name + " restarted (pid " + std::to_string(s.child->pid()) + ")");
  }

  // <run_dir>/launch.json: the pids of etcd and the sites, rewritten when a site restarts.
  void write_pids() {
    json sites = json::object();
    for (const auto& s : sites_)
      if (s.child) sites[s.name] = s.child->pid();
    pids_["sites"] = sites;
    write_file(fs::path(config_.job.run_dir) / "launch.json", pids_.dump(2) + "\n");
  }

  const JobConfig& config_;
  const LaunchRun& run_;
  std::vector<std::string> overrides_, env_;
  json pids_;
  Clock::time_point t0_;
  SiteRestartPolicy policy_;
  fs::path events_;
  std::vector<SiteProcess> sites_;
  int failure_code_ = 1;
};

// After every site finished: the job's metrics, events (the launcher's own among them) and
// summary in run_dir, and the table on the terminal.
void finish(const JobConfig& config, SiteFleet& fleet, double wall) {
  const fs::path run_dir = config.job.run_dir;
  std::vector<json> summaries;
  for (const auto& s : fleet.sites()) {
    const auto path = s.dir / "summary.json";
    if (!fs::exists(path)) throw make_error(ErrorKind::Io, "site ", s.name, " finished but left no ", path.string());
    summaries.push_back(read_json(path));
  }
  // A one-site job ran in run_dir itself: its files already are the job's (the launcher's own
  // events stay in launch-events.jsonl beside them).
  json summary = summaries.front();
  if (fleet.sites().size() > 1) {
    std::vector<std::pair<std::string, fs::path>> metrics, events;
    for (const auto& s : fleet.sites()) {
      metrics.emplace_back(s.name, s.dir / "metrics.jsonl");
      events.emplace_back(s.name, s.dir / "events.jsonl");
    }
    events.emplace_back("launch", fleet.events_file());
    write_file(run_dir / "metrics.jsonl", merge_jsonl_by_time(metrics));
    write_file(run_dir / "events.jsonl", merge_jsonl_by_time(events));
    summary = job_summary(config, summaries, wall);
    write_file(run_dir / "summary.json", summary.dump(2) + "\n");
  }
  say(format("meridian launch: job %s done in %.1f s (%s), summary in %s", config.job.name.c_str(), wall,
             fleet.sites().size() > 1 ? std::string(to_string(config.outer.algorithm)).c_str() : "one site",
             (run_dir / "summary.json").c_str()));
  print_table(summary, summaries);
}

// A job of several sites over ZeroMQ that lists no keys still runs over CURVE: keys for its sites
// in <run_dir>/keys (kept, so a relaunch resumes with the same), and the settings that name them.
std::optional<std::vector<std::string>> throwaway_link_keys(const JobConfig& config, const fs::path& run_dir) {
  if (config.sites.size() < 2 || config.transport.kind != JobConfig::Transport::Kind::Zmq ||
      config.transport.link_key_file)
    return std::nullopt;
  const fs::path dir = run_dir / "keys";
  const bool kept = std::all_of(config.sites.begin(), config.sites.end(),
                                [&](const auto& s) { return fs::exists(dir / s.name / "link.key"); });
  if (!kept) {
    std::error_code ec;
    fs::remove_all(dir, ec);  // a partial set, of another job's shape
    write_link_keys(config, dir);
  }
  return std::vector<std::string>{"transport.link_key_file=" + (dir / "{site}" / "link.key").string(),
                                  "transport.link_public_key_file=" + (dir / "{site}" / "link.pub").string()};
}

// etcd's auth on for the local member: a user per site with the job's role only (its password in
// dir/<site>.password), root's password in dir/root.password for an operator's look; all 0600.
void lock_local_etcd(const JobConfig& config, const EtcdMember& etcd, const fs::path& dir) {
  EtcdOptions options{{etcd.endpoint()}, std::chrono::seconds(5)};
  options.tls = etcd.tls();
  EtcdClient admin(options);  // auth is still off: anyone on the CA may administer
  std::map<std::string, std::string> passwords;
  for (const auto& site : config.sites) {
    passwords[site.name] = random_secret();
    write_secret_file(dir / (site.name + ".password"), passwords[site.name] + "\n");
  }
  grant_job(admin, config.job.name, passwords);
  const std::string root = random_secret();
  write_secret_file(dir / "root.password", root + "\n");
  enable_auth(admin, root);
}

}  // namespace

int run_launch(const JobConfig& config, const LaunchRun& run) {
  const BlockedStopSignals stops;  // before any child exists, so no Ctrl-C is lost to the default action
  const auto t0 = Clock::now();
  const fs::path run_dir = config.job.run_dir;
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  if (ec) throw make_error(ErrorKind::Io, "cannot create run directory ", run_dir.string(), ": ", ec.message());

  std::vector<std::string> overrides = run.overrides;
  std::unique_ptr<EtcdMember> etcd;
  if (config.sites.size() > 1 && config.control.endpoints.empty()) {
    // Over mutual TLS and with etcd's auth on, as a deployment's etcd is: the secure path is the
    // one every demo takes.
    const EtcdTls tls = write_loopback_tls(run_dir / "tls");
    etcd = std::make_unique<EtcdMember>(run_dir, tls);
    lock_local_etcd(config, *etcd, run_dir / "tls");
    overrides.push_back("control.endpoints=[\"" + etcd->endpoint() + "\"]");
    overrides.push_back("control.ca_file=" + tls.ca_file.string());
    overrides.push_back("control.cert_file=" + tls.cert_file.string());
    overrides.push_back("control.key_file=" + tls.key_file.string());
    overrides.push_back("control.password_file=" + (run_dir / "tls" / "{site}.password").string());
    say(stamp(t0) + " etcd " + etcd->endpoint() + " over mutual TLS, auth on, a user per site; secrets made for this "
        "run in " + (run_dir / "tls").string() + " (log " + etcd->log_path().string() + ")");
  }
  if (const auto keys = throwaway_link_keys(config, run_dir)) {
    overrides.insert(overrides.end(), keys->begin(), keys->end());
    say(stamp(t0) + " links over CURVE, with keys made for this run in " + (run_dir / "keys").string());
  }
  SiteFleet fleet(config, run, overrides, site_environment(config),
                  json{{"launcher", ::getpid()},
                       {"etcd", etcd ? json(etcd->pid()) : json(nullptr)},
                       {"endpoints", etcd ? json::array({etcd->endpoint()}) : json(config.control.endpoints)}},
                  t0);
  std::string logs;
  for (const auto& s : fleet.sites()) logs += (logs.empty() ? "" : ", ") + (s.dir / "site.log").string();
  say(stamp(t0) + " started " + std::to_string(fleet.sites().size()) + " site(s), " +
      std::to_string(replica_count(config)) + " replica(s); logs: " + logs);

  // Sites first, etcd last: a site shutting down may still talk to the control plane.
  const auto stop_everything = [&] {
    stop_children(fleet.children(), std::chrono::seconds(10), &stops);
    if (etcd) etcd->stop();
  };
  auto next_progress = t0 + std::chrono::seconds(2);
  for (;;) {
    if (const int sig = stops.wait(std::chrono::milliseconds(100))) {
      say(stamp(t0) + " " + ::strsignal(sig) + ": stopping every site");
      stop_everything();
      return 128 + sig;
    }
    const auto state = fleet.poll();
    if (state == SiteFleet::State::Failed) {
      stop_everything();
      return fleet.failure_code();
    }
    if (etcd && etcd->child()->poll()) {
      say(stamp(t0) + " the local etcd member exited; stopping every site");
      stop_everything();
      say("meridian launch: etcd stopped unexpectedly; the end of " + etcd->log_path().string() + ":");
      std::printf("%s", tail_lines(etcd->log_path(), 20).c_str());
      std::fflush(stdout);
      return 1;
    }
    if (state == SiteFleet::State::Done) break;
    if (Clock::now() >= next_progress) {
      say(progress_line(t0, fleet.sites(), config.inner.steps));
      next_progress += std::chrono::seconds(2);
    }
  }
  if (etcd) etcd->stop();
  finish(config, fleet, seconds_since(t0));
  return 0;
}

}  // namespace meridian
