#include "sites/site/agent.hpp"

#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/io/stop_signals.hpp"
#include "core/util/clock.hpp"
#include "core/util/error.hpp"
#include "sites/site/metrics_server.hpp"
#include "sites/site/ops_service.hpp"
#include "sites/site/store_secret.hpp"
#include "intrasite/comm/tcp_store.hpp"
#include "intrasite/group/protocol.hpp"

namespace meridian {

SiteAgentOptions site_agent_options(const JobConfig& config, const std::string& site) {
  const auto& r = config.replicas;
  SiteAgentOptions o;
  o.site = site;
  o.replicas = r.count;
  o.restart = r.restart;
  o.max_restarts = r.max_restarts;
  o.heartbeat_timeout_s = r.heartbeat_timeout_ms / 1000.0;
  o.first_beat_timeout_s = 3 * o.heartbeat_timeout_s;
  o.failure_grace_s = r.collective_timeout_ms / 1000.0 + 1.0;
  return o;
}

Counter read_counter(Store& store, const std::string& key) {
  Counter c;
  if (!store.check(key)) return c;
  c.present = true;
  const auto bytes = store.get(key, std::chrono::milliseconds(0));
  if (bytes.size() != sizeof c.value) {
    c.problem = "holds " + std::to_string(bytes.size()) + " bytes, not an 8-byte counter";
    return c;
  }
  std::memcpy(&c.value, bytes.data(), sizeof c.value);
  return c;
}

namespace {

void reset_counter(Store& store, const std::string& key) {
  const std::int64_t zero = 0;
  store.set(key, std::as_bytes(std::span(&zero, 1)));
}

}  // namespace

SiteAgent::SiteAgent(SiteAgentOptions options, Store& store, Launcher& launcher, RunLog& log,
                     std::function<double()> clock, std::FILE* out)
    : options_(std::move(options)), store_(store), launcher_(launcher), log_(log), clock_(std::move(clock)),
      out_(out) {
  MERIDIAN_CHECK(options_.replicas >= 1, "replicas=", options_.replicas);
  for (int i = 0; i < options_.replicas; ++i) {
    slots_.emplace_back();
    slots_.back().id = i;
  }
}

void SiteAgent::start() {
  const double now = clock_();
  for (auto& s : slots_) spawn(s, now);
}

SiteOutcome SiteAgent::step() {
  const double now = clock_();
  reap(now);
  for (auto& s : slots_)
    if (s.alive && !s.killed) read_store(s, now);
  decide(now);
  restart_dead(now);
  return outcome();
}

void SiteAgent::spawn(Slot& s, double now) {
  // Readiness is "the counter grew since the process started": whatever an earlier incarnation
  // announced is not this one's. The first incarnation owns all of it (the store is the agent's
  // own and new): a replica a cluster launcher started can announce itself before this line runs.
  // Heartbeats alike: only a beat after this line is the new process's.
  if (s.incarnation > 0) {
    const auto ready_key = site_keys::ready(s.id);
    const Counter ready = read_counter(store_, ready_key);
    if (!ready.problem.empty()) reset_counter(store_, ready_key);
    s.ready_seen = ready.problem.empty() ? ready.value : 0;
    const Counter beats = read_counter(store_, site_keys::heartbeat(s.id));
    s.heartbeat_seen = beats.present && beats.problem.empty() ? beats.value : -1;
  }
  s.ready = false;
  s.beating = false;
  s.killed = false;
  s.failed_at.reset();
  s.last_heartbeat = now;  // from here a starting replica has allowed_silence(false, ...) for its first beat
  s.incarnation += 1;
  launcher_.start(s.id, s.incarnation);
  s.alive = true;
  event(s.incarnation == 1 ? "replica_started" : "replica_restarted", {{"id", s.id}, {"incarnation", s.incarnation}});
}

void SiteAgent::reap(double now) {
  for (auto& s : slots_) {
    if (!s.alive) continue;
    const auto status = launcher_.poll(s.id);
    if (!status) continue;
    s.alive = false;
    s.last_exit = status;
    nlohmann::json fields = {{"id", s.id}, {"incarnation", s.incarnation}};
    if (status->signal != 0) fields["signal"] = status->signal;
    else fields["exit_code"] = status->code;
    if (!status->cause.empty()) fields["cause"] = status->cause;
    if (status->permanent()) fields["permanent"] = true;
    event("replica_exited", fields);
    if (status->success()) {
      s.finished = true;
      finishing_ = true;
      say("replica " + std::to_string(s.id) + " finished");
    } else {
      say("replica " + std::to_string(s.id) + " exited: " + describe(*status) +
          (status->cause.empty() ? "" : ": " + status->cause) +
          (status->permanent() ? "; not restarted: it would fail the same way" : ""));
      if (member(s) && !s.killed) note_cause(now);  // an eviction noted its cause when it happened
    }
  }
}

void SiteAgent::read_store(Slot& s, double now) {
  const std::string keys[2] = {site_keys::heartbeat(s.id), site_keys::ready(s.id)};
  Counter counters[2];
  for (int k = 0; k < 2; ++k) {
    counters[k] = read_counter(store_, keys[k]);
    if (counters[k].problem.empty()) continue;
    event("replica_misbehaved", {{"id", s.id}, {"key", keys[k]}, {"problem", counters[k].problem}});
    reset_counter(store_, keys[k]);  // so the next incarnation finds a usable counter
    evict(s, "bad value at " + keys[k] + ": " + counters[k].problem, now);
    return;
  }
  const Counter& hb = counters[0];
  const Counter& ready = counters[1];
  if (hb.present && hb.value != s.heartbeat_seen) {
    s.heartbeat_seen = hb.value;
    s.last_heartbeat = now;
    s.beating = true;
  }
  // A member announces itself as it moves to a newer generation that lists it: that is no joiner.
  // A process waiting unlisted announces itself again every second (ReplicaGroup::join), so one
  // read while its slot still counted as a member (a cluster launcher's restart, before the agent
  // gave up on the old process) is heard again once the slot is open.
  if (ready.present && ready.value != s.ready_seen) {
    s.ready = s.ready || (ready.value > s.ready_seen && !member(s));
    s.ready_seen = ready.value;
  }
  if (member(s) && !s.failed_at && store_.check(site_keys::failure(current_.number, s.id))) {
    s.failed_at = now;
    note_cause(now);
    event("failure_reported", {{"id", s.id}, {"generation", current_.number}});
  }
}

void SiteAgent::decide(double now) {
  std::vector<ReplicaView> views;
  int runnable = 0;
  for (const auto& s : slots_) {
    // A finished replica is no loss to the group: leaving it out re-forms nothing.
    if (s.finished) continue;
    const bool is_member = std::count(current_.members.begin(), current_.members.end(), s.id) > 0;
    // A member's slot running a newer incarnation still lost the member: the new process joins
    // afresh once the group without it is published.
    const bool running = s.alive && !s.killed && (!is_member || member(s));
    views.push_back(
        ReplicaView{s.id, running, s.ready, s.last_heartbeat, is_member ? s.failed_at : std::nullopt, s.beating});
    if (running || ((!s.alive || s.killed) && can_restart(s))) ++runnable;
  }
  MembershipOptions mo;
  mo.heartbeat_timeout_s = options_.heartbeat_timeout_s;
  mo.first_beat_timeout_s = options_.first_beat_timeout_s;
  mo.failure_grace_s = options_.failure_grace_s;
  // The first group waits for every replica that can still come, later ones go on with whoever is left.
  mo.min_members = current_.number < 0 ? std::max(1, runnable) : 1;
  const MembershipDecision d = decide_membership(now, current_, views, mo);

  for (int id : d.evict) {
    Slot& s = slots_.at(static_cast<std::size_t>(id));
    if (s.killed) continue;
    const double silent = now - s.last_heartbeat;
    const double allowed = allowed_silence(s.beating, mo);
    const auto ms = [](double seconds) { return std::to_string(std::lround(seconds * 1000)) + " ms"; };
    evict(s,
          silent <= allowed ? "no failure report within " + ms(options_.failure_grace_s) + " of a failed collective"
          : s.beating       ? "no heartbeat for " + ms(silent)
                            : "no first heartbeat " + ms(silent) + " after its start",
          now);
  }
  if (d.next) {
    publish(*d.next, d.reason, now);
    return;
  }
  if (!d.reason.empty() && d.reason != waiting_) {
    waiting_ = d.reason;
    event("waiting", {{"reason", d.reason}});
    say(d.reason);
  }
  // Every member is gone and nobody is ready to replace them: the published group is dead, and
  // holding on to it would keep its restarted slots counted as lost members forever.
  const bool any_member_running = std::any_of(views.begin(), views.end(), [&](const ReplicaView& v) {
    return v.running && std::count(current_.members.begin(), current_.members.end(), v.id) > 0;
  });
  if (current_.number >= 0 && !any_member_running) {
    current_.members.clear();
    for (auto& s : slots_) s.member_incarnation = 0;
  }
}

void SiteAgent::publish(const Generation& g, const std::string& reason, double now) {
  store_.set(site_keys::generation(g.number), encode_generation(g));
  nlohmann::json fields = {{"number", g.number}, {"members", g.members}, {"reason", reason}};
  if (cause_at_) fields["since_cause_ms"] = std::lround((now - *cause_at_) * 1000);
  event("generation", fields);
  say("generation " + std::to_string(g.number) + ": " + reason);
  current_ = g;
  cause_at_.reset();
  waiting_.clear();
  for (auto& s : slots_) {
    s.failed_at.reset();  // reports are per generation (fail/<n>/<id>)
    const bool is_member = std::count(g.members.begin(), g.members.end(), s.id) > 0;
    s.member_incarnation = is_member ? s.incarnation : 0;
    if (is_member) s.ready = false;  // its next wait to join bumps ready/<id> again
  }
}

void SiteAgent::evict(Slot& s, const std::string& reason, double now) {
  launcher_.signal(s.id, SIGKILL);
  s.killed = true;
  ++evictions_;
  if (member(s)) note_cause(now);
  event("replica_evicted", {{"id", s.id},
                            {"incarnation", s.incarnation},
                            {"reason", reason},
                            {"silent_for_ms", std::lround((now - s.last_heartbeat) * 1000)}});
  say("evicted replica " + std::to_string(s.id) + ": " + reason);
}

void SiteAgent::restart_dead(double now) {
  for (auto& s : slots_)
    if (!s.alive && !s.finished && can_restart(s)) {
      s.restarts += 1;
      spawn(s, now);
    }
}

AgentFigures SiteAgent::figures() const {
  AgentFigures f;
  f.generation = current_.number;
  f.members = static_cast<int>(current_.members.size());
  f.replicas = options_.replicas;
  for (const auto& s : slots_) f.restarts += s.restarts;
  f.evictions = evictions_;
  return f;
}

nlohmann::json SiteAgent::status(double now) const {
  nlohmann::json replicas = nlohmann::json::array();
  for (const auto& s : slots_) {
    nlohmann::json r = {{"id", s.id},       {"alive", s.alive},         {"member", member(s)},
                        {"finished", s.finished}, {"restarts", s.restarts}, {"incarnation", s.incarnation}};
    if (s.heartbeat_seen >= 0) r["heartbeat_age_s"] = now - s.last_heartbeat;
    replicas.push_back(std::move(r));
  }
  return {{"generation", current_.number}, {"members", current_.members}, {"replicas", std::move(replicas)}};
}

bool SiteAgent::evict_replica(int id, const std::string& reason, double now) {
  if (id < 0 || id >= static_cast<int>(slots_.size()) || !slots_[id].alive || slots_[id].killed) return false;
  evict(slots_[id], reason, now);
  return true;
}

SiteOutcome SiteAgent::outcome() {
  std::vector<int> finished, lost;
  for (const auto& s : slots_) {
    if (s.alive) return SiteOutcome::Running;
    (s.finished ? finished : lost).push_back(s.id);
  }
  if (!finished.empty()) {
    event("site_done", {{"finished", finished}, {"lost", lost}});
    say("done");
    return SiteOutcome::Done;
  }
  failure_ = "site " + options_.site + ": no replica can run any more";
  for (const auto& s : slots_)
    failure_ += std::string(s.id == 0 ? ": " : "; ") + "replica " + std::to_string(s.id) + " ended with " +
                (s.last_exit ? describe(*s.last_exit) : std::string("no exit status")) + " after " +
                std::to_string(s.restarts) + " restart(s)" +
                (s.last_exit && !s.last_exit->cause.empty() ? " (" + s.last_exit->cause + ")" : "");
  failure_ += options_.restart ? " (max_restarts = " + std::to_string(options_.max_restarts) + ")"
                               : " ([replicas].restart = false)";
  event("site_failed", {{"reason", failure_}});
  return SiteOutcome::Failed;
}

bool SiteAgent::member(const Slot& s) const {
  return s.member_incarnation != 0 && s.member_incarnation == s.incarnation;
}

bool SiteAgent::can_restart(const Slot& s) const {
  const bool permanent = s.last_exit && s.last_exit->permanent();
  return options_.restart && s.restarts < options_.max_restarts && !finishing_ && !permanent;
}

std::optional<ErrorKind> SiteAgent::permanent_failure() const {
  for (const auto& s : slots_)
    if (!s.alive && !s.finished && s.last_exit && s.last_exit->permanent()) return s.last_exit->permanent();
  return std::nullopt;
}

void SiteAgent::note_cause(double now) { cause_at_ = std::min(cause_at_.value_or(now), now); }

void SiteAgent::event(const std::string& kind, nlohmann::json fields) {
  fields["site"] = options_.site;
  log_.event(kind, std::move(fields));
}

void SiteAgent::say(const std::string& line) {
  if (!out_) return;
  std::fprintf(out_, "meridian site %s: %s\n", options_.site.c_str(), line.c_str());
  std::fflush(out_);
}

namespace {

// After SIGINT/SIGTERM: replicas get SIGTERM and a few seconds to stop on their own (the launcher's
// destructor SIGKILLs and reaps whatever is left).
void terminate_all(ProcessLauncher& launcher, int replicas) {
  for (int id = 0; id < replicas; ++id) launcher.signal(id, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (launcher.any_running() && std::chrono::steady_clock::now() < deadline) {
    for (int id = 0; id < replicas; ++id) launcher.poll(id);
    const timespec pause{0, 20'000'000};
    ::nanosleep(&pause, nullptr);
  }
}

}  // namespace

int run_site(const JobConfig& config, const SiteRun& run) {
  // SIGINT/SIGTERM are blocked in every thread (the store server's thread inherits the mask) and
  // taken synchronously by the loop's wait, which doubles as its 20 ms pause: no handler, no
  // interrupted calls. Children unblock them before exec.
  const BlockedStopSignals stop_signals;
  RunLog log(config.job.run_dir);
  const StoreSecret secret(config.job.run_dir);
  TcpStoreServer server(run.store_address, config.replicas.store_port, secret.value());
  TcpStoreClient store(server.endpoint(), secret.value());
  const std::string endpoint = server.endpoint();
  ProcessLauncher launcher(
      [&](int id) {
        std::vector<std::string> argv = {run.program.string(), "replica",   "--config", run.config_path.string(),
                                         "--site",             run.site,    "--id",     std::to_string(id),
                                         "--store",            endpoint};
        for (const auto& o : run.overrides) argv.insert(argv.end(), {"--set", o});
        return argv;
      },
      config.job.run_dir);
  AttachedLauncher attached(store);
  Launcher& replicas = run.attach ? static_cast<Launcher&>(attached) : launcher;
  const std::function<double()> clock = steady_seconds;
  auto options = site_agent_options(config, run.site);
  SiteAgent agent(options, store, replicas, log, clock, stdout);
  log.event("site_start",
            {{"site", run.site}, {"replicas", config.replicas.count}, {"store", endpoint}, {"attach", run.attach}});
  std::printf("meridian site %s: %d replica(s), store %s, run dir %s\n", run.site.c_str(), config.replicas.count,
              endpoint.c_str(), config.job.run_dir.c_str());
  std::fflush(stdout);

  // First: replicas started by a cluster launcher count as ready only from here on, so nothing
  // slow (binding, fsync of ops.json) may come between the store and this.
  agent.start();
  SiteFiguresBoard board(run.site);
  std::unique_ptr<MetricsServer> metrics;
  if (config.ops.metrics) {
    metrics = std::make_unique<MetricsServer>(config.ops.metrics_address, metrics_port(config, run.site),
                                              [&board] { return board.render(); });
    const std::string url =
        "http://" + config.ops.metrics_address + ":" + std::to_string(metrics->port()) + "/metrics";
    log.event("metrics_listening", {{"site", run.site}, {"port", metrics->port()}, {"url", url}});
    std::printf("meridian site %s: metrics on %s\n", run.site.c_str(), url.c_str());
    std::fflush(stdout);
  }

  OpsService ops(config, run.site, run.ops_token, agent, store, log, board, clock);
  log.event("ops_listening", {{"site", run.site}, {"endpoint", ops.endpoint()}, {"token", !run.ops_token.empty()}});

  for (int round = 0;; ++round) {
    const SiteOutcome outcome = agent.step();
    if (round % 5 == 0) board.update(store, agent.figures());
    ops.poll();
    if (outcome == SiteOutcome::Done) return 0;
    // The site exits as its replicas did when their input is at fault, so the launcher above
    // does not restart it either.
    if (outcome == SiteOutcome::Failed)
      throw make_error(agent.permanent_failure().value_or(ErrorKind::Peer), agent.failure());
    if (const int sig = stop_signals.wait(std::chrono::milliseconds(20))) {
      log.event("site_stopped", {{"site", run.site}, {"signal", sig}});
      std::printf("meridian site %s: %s, stopping the replicas\n", run.site.c_str(), ::strsignal(sig));
      std::fflush(stdout);
      if (!run.attach) terminate_all(launcher, config.replicas.count);
      return 128 + sig;
    }
  }
}

}  // namespace meridian
