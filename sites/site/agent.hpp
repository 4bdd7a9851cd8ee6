#pragma once
// The site agent: hosts the site's rendezvous store, runs the site's M replica processes, watches
// them (exit status, heartbeats, readiness and failure reports in the store), decides membership
// generations with decide_membership, publishes them, evicts hung replicas and restarts dead ones.
//
// SiteAgent holds the logic and takes its store, processes, run log and clock from the caller, so
// tests drive it step by step with a MemoryStore, fake processes and a fake clock; run_site wires
// it to a TcpStoreServer, real processes and the wall clock.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/config/job_config.hpp"
#include "core/runlog/run_log.hpp"
#include "sites/site/process.hpp"
#include "sites/site/site_metrics.hpp"
#include "intrasite/comm/store.hpp"
#include "intrasite/group/membership.hpp"

namespace meridian {

struct SiteAgentOptions {
  std::string site;
  int replicas = 1;
  bool restart = true;
  int max_restarts = 3;  // per slot, over the run
  double heartbeat_timeout_s = 10;
  double first_beat_timeout_s = 30;
  double failure_grace_s = 11;
};

// From [replicas]. A starting replica gets three heartbeat timeouts for its first beat. The failure
// grace is one collective timeout plus slack: a member stuck in the failed collective only notices
// (and reports) when its own collective times out.
SiteAgentOptions site_agent_options(const JobConfig& config, const std::string& site);

// A counter in the store (8 bytes, native int64, as Store::add writes it). `problem` says what is
// wrong when the key holds something else: a replica wrote garbage there.
struct Counter {
  bool present = false;
  std::int64_t value = 0;
  std::string problem;
};
Counter read_counter(Store& store, const std::string& key);

enum class SiteOutcome { Running, Done, Failed };

class SiteAgent {
 public:
  // `clock`: seconds on a monotonic clock. `out`: one line per notable event for the operator (may be null).
  SiteAgent(SiteAgentOptions options, Store& store, Launcher& launcher, RunLog& log, std::function<double()> clock,
            std::FILE* out = nullptr);

  void start();  // starts every slot's first process
  // One round: reap exits, read the store, decide, evict, publish, restart. Running until every
  // replica is done (Done) or none can run any more (Failed; failure() says why).
  SiteOutcome step();

  const Generation& generation() const { return current_; }
  // For the metrics endpoint.
  AgentFigures figures() const;
  // For the operator (meridianctl status): generation, members, and every slot's health.
  nlohmann::json status(double now) const;
  // The operator evicts a replica: SIGKILL, then the usual regroup (and restart, as configured).
  // False when `id` is no slot or its process is not running.
  bool evict_replica(int id, const std::string& reason, double now);
  const std::string& failure() const { return failure_; }
  // After Failed: the kind of error a replica ended with when its input was at fault (bad data, a
  // bad config, a checkpoint of another shape). Such a replica is not restarted; nullopt otherwise.
  std::optional<ErrorKind> permanent_failure() const;

 private:
  struct Slot {
    int id = 0;
    int incarnation = 0;         // processes started in this slot so far
    int member_incarnation = 0;  // the incarnation the current generation holds (0: not a member)
    int restarts = 0;
    bool alive = false;     // its latest process has not been reaped
    bool killed = false;    // evicted: SIGKILL sent, not reaped yet
    bool finished = false;  // its latest process exited 0: training done
    std::optional<ExitStatus> last_exit;
    std::int64_t heartbeat_seen = -1;
    double last_heartbeat = 0;
    bool beating = false;  // its latest process has sent a heartbeat
    std::int64_t ready_seen = 0;
    bool ready = false;
    std::optional<double> failed_at;  // reported a failed collective of the current generation
  };

  void spawn(Slot& s, double now);
  void reap(double now);
  void read_store(Slot& s, double now);
  void decide(double now);
  void publish(const Generation& g, const std::string& reason, double now);
  void evict(Slot& s, const std::string& reason, double now);
  void restart_dead(double now);
  SiteOutcome outcome();
  bool member(const Slot& s) const;
  bool can_restart(const Slot& s) const;
  void note_cause(double now);
  void event(const std::string& kind, nlohmann::json fields);
  void say(const std::string& line);

  SiteAgentOptions options_;
  Store& store_;
  Launcher& launcher_;
  RunLog& log_;
  std::function<double()> clock_;
  std::FILE* out_;
  std::vector<Slot> slots_;
  Generation current_;
  std::optional<double> cause_at_;  // earliest unresolved exit, eviction or failure report of a member
  bool finishing_ = false;          // a replica finished training: nothing is restarted any more
  std::string waiting_;             // the last "waiting" reason logged, so it is logged once
  std::string failure_;
  int evictions_ = 0;
};

// What `meridian site` runs: the store on 127.0.0.1:[replicas].store_port, replicas started as
// `program replica --config <config_path> --site <site> --id <i> --store <endpoint> [--set ...]`.
struct SiteRun {
  std::string site;
  std::filesystem::path config_path;  // absolute
  std::vector<std::string> overrides;
  std::filesystem::path program;
  bool attach = false;  // replicas are started by a cluster launcher, not by the agent
  std::string store_address = "127.0.0.1";  // the interface the store listens on
  std::string ops_token;  // ops_token(): MERIDIAN_OPS_TOKEN or [ops] token_file; empty: state-changing commands are refused
};

// 0 when every replica finished; 128 + signal after SIGINT/SIGTERM (replicas terminated and reaped);
// Error(Peer) when no replica can run any more.
int run_site(const JobConfig& config, const SiteRun& run);

}  // namespace meridian
