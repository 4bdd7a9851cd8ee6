#pragma once
// `meridian launch` runs a whole job on one machine: a local etcd member (the control plane the
// sites need when the job names none) and one `meridian site` per [[site]]. Both kinds of child
// are LoggedChild: output to a log file, their own process group (a terminal's Ctrl-C reaches the
// launcher alone, which then stops the sites before etcd, so no site loses its control plane
// while it shuts down), and a parent-death signal so a launcher killed with -9 leaves nothing
// behind. ProcessLauncher (sites/site/process.hpp) does not fit: it names logs replica-<id>.log
// and takes no environment.
#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/io/stop_signals.hpp"
#include "sites/site/process.hpp"
#include "crosssite/control/etcd_tls.hpp"

namespace meridian {

class LoggedChild {
 public:
  // fork/exec of argv[0] with `env` (NAME=value strings) as its whole environment; stdout and
  // stderr appended to `log` after a `header` line. Error(Io) when it cannot start.
  LoggedChild(const std::vector<std::string>& argv, const std::vector<std::string>& env,
              const std::filesystem::path& log, const std::string& header);
  ~LoggedChild();  // stop(0): SIGKILL and reap whatever still runs
  LoggedChild(const LoggedChild&) = delete;
  LoggedChild& operator=(const LoggedChild&) = delete;

  pid_t pid() const { return pid_; }
  bool running() const { return !status_; }
  void signal(int sig);                 // to the child alone; no-op once it was reaped
  std::optional<ExitStatus> poll();     // reaps without waiting; the status once it ended
  // SIGKILL to its whole process group (anything it left running), then reap it.
  ExitStatus kill_and_reap();

 private:
  pid_t pid_ = -1;
  std::optional<ExitStatus> status_;
};

// SIGTERM to every running child, up to `grace` for them to exit, then SIGKILL (process group)
// and reap what remains. A stop signal arriving meanwhile in `hurry` (a second Ctrl-C) skips the
// rest of the grace.
void stop_children(const std::vector<LoggedChild*>& children, std::chrono::milliseconds grace,
                   const BlockedStopSignals* hurry = nullptr);

// The child environment: this process's environ with `set` (NAME=value) replacing or adding.
std::vector<std::string> child_environment(const std::vector<std::string>& set);

// The last `lines` lines of a text file ("" when it cannot be read).
std::string tail_lines(const std::filesystem::path& file, int lines);

// An etcd member on loopback: the single member `meridian launch` starts for a job run on one
// machine, or one member of a static cluster (LocalEtcdCluster below; one member per site when a
// test or a demo kills and stops sites together with their members). The process is a LoggedChild
// (own process group, dies with its parent); pid() is there for a test to signal it.
class EtcdMember {
 public:
  static constexpr const char* kBinary = "/usr/bin/etcd";

  // Where one member lives and how it finds its cluster. Every port is fixed before any member of
  // the cluster starts, since each one's peer URL is part of every member's command line.
  struct Spec {
    std::string name = "local";
    std::filesystem::path data_dir;
    std::filesystem::path log;  // appended to, one header line per start
    int client_port = 0;
    int peer_port = 0;
    // Every member of the cluster, this one included: "name=http://127.0.0.1:<peer port>,...";
    // empty: this member alone.
    std::string initial_cluster;
    // Raft timers. Loopback members have no network delay for etcd's defaults (100 ms / 1 s) to
    // absorb; a lone member elects itself after one election timeout.
    int heartbeat_ms = 10;
    int election_ms = 100;
    // Mutual TLS for clients and peers alike: this member's certificate (one for both ends) and
    // the job's CA, which every client and peer certificate must chain to. Its /health then
    // answers on a plain loopback port of its own (metrics_port, etcd's --listen-metrics-urls),
    // which serves health and metrics only.
    std::optional<EtcdTls> tls;
    int metrics_port = 0;
  };

  // The single member of `meridian launch`: data in <run_dir>/etcd (removed first: the commit log
  // of an earlier launch would only confuse this one), log in <run_dir>/etcd.log, free ports,
  // TLS with `tls` when given. Ready when /health answers (within ~15 s); Error(Io) naming the log
  // file when it does not start.
  explicit EtcdMember(const std::filesystem::path& run_dir, std::optional<EtcdTls> tls = std::nullopt,
                      const std::string& binary = kBinary);
  // One member of a static cluster, started and not waited for: a member of a cluster becomes
  // healthy only once a majority of its members run, so start them all, then wait_healthy() each.
  // The data dir is used as found: an empty one makes a new member, one that holds this member's
  // state makes it that member again. Error(Io) when the process cannot be started at all.
  EtcdMember(Spec spec, const std::string& binary = kBinary);
  ~EtcdMember();  // stop()
  EtcdMember(const EtcdMember&) = delete;
  EtcdMember& operator=(const EtcdMember&) = delete;

  const std::string& name() const { return spec_.name; }
  std::string endpoint() const { return scheme() + "127.0.0.1:" + std::to_string(spec_.client_port); }
  std::string peer_url() const { return scheme() + "127.0.0.1:" + std::to_string(spec_.peer_port); }
  const std::optional<EtcdTls>& tls() const { return spec_.tls; }
  int client_port() const { return spec_.client_port; }
  const std::filesystem::path& data_dir() const { return spec_.data_dir; }
  const std::filesystem::path& log_path() const { return spec_.log; }
  // The running process's id; -1 once it was killed, stopped or has exited.
  pid_t pid();
  bool running();  // reaps it if it has exited
  LoggedChild* child() { return child_ ? &*child_ : nullptr; }

  // One /health probe: true when the member has a leader and answered through Raft.
  bool healthy(std::chrono::milliseconds timeout = std::chrono::milliseconds(500));
  // Probes /health until it answers true (true), the process exits or the deadline passes (false).
  bool wait_healthy(std::chrono::steady_clock::time_point deadline);

  // Faults for tests. kill(): SIGKILL, reaped, a crash; the data dir stays as the crash left it.
  // pause(): SIGSTOP, returning once every thread of it has stopped (~1 s at most); a paused
  // member still accepts TCP connections and takes in what is sent to it (the kernel does), but
  // answers nothing, to its clients or its peers, until resume() (SIGCONT). No-ops when it does
  // not run.
  void kill();
  void pause();
  void resume() { signal(SIGCONT); }
  void signal(int sig);
  // Starts it again after kill() or stop(), with the same name, ports and data dir, and returns
  // without waiting (wait_healthy). It rejoins its cluster from its data dir; a data dir without
  // the member's state is refused (Error(Io)): a member that lost its state must be removed from
  // the cluster and added anew (etcdctl member remove/add), not restarted under its old identity.
  void restart();
  // SIGTERM (a paused member is resumed to take it), up to ~5 s, then SIGKILL; reaped. Idempotent.
  void stop();

 private:
  std::string scheme() const { return spec_.tls ? "https://" : "http://"; }
  std::vector<std::string> tls_flags() const;
  void spawn(const std::string& state, const std::string& header);
  bool start_once(int attempt, std::chrono::steady_clock::time_point deadline);

  Spec spec_;
  std::string binary_;
  std::optional<LoggedChild> child_;
};

// A static etcd cluster of `size` members on loopback (m0, m1, ...), as one machine runs the
// control plane of several sites: data in <dir>/<name>, log in <dir>/<name>.log, free ports, the
// raft timers a bit longer than the single member's (25 ms / 250 ms) so a busy machine does not
// hold elections by itself. Ready when every member answers /health (within ~20 s), started anew
// on other ports when one was taken meanwhile; Error(Io) naming the logs when it does not start.
class LocalEtcdCluster {
 public:
  explicit LocalEtcdCluster(const std::filesystem::path& dir, int size = 3,
                            const std::string& binary = EtcdMember::kBinary);
  ~LocalEtcdCluster();  // stop()
  LocalEtcdCluster(const LocalEtcdCluster&) = delete;
  LocalEtcdCluster& operator=(const LocalEtcdCluster&) = delete;

  int size() const { return static_cast<int>(members_.size()); }
  EtcdMember& member(int i) { return *members_.at(static_cast<std::size_t>(i)); }
  // Every member's client URL, in member order: what a client of the whole cluster is given.
  std::vector<std::string> endpoints() const;
  void stop();  // every member, one after the other

 private:
  bool start_once(const std::filesystem::path& dir, int size, const std::string& binary, int attempt,
                  std::chrono::steady_clock::time_point deadline);

  std::vector<std::unique_ptr<EtcdMember>> members_;
};

// Throwaway TLS files for etcd members and clients on this machine, in `dir`: a fresh CA (ca.crt,
// ca.key) and one certificate for 127.0.0.1 and localhost (etcd.crt, etcd.key) that the member and
// its local clients all show. What `meridian launch` and the tests run etcd with.
EtcdTls write_loopback_tls(const std::filesystem::path& dir);

// A loopback TCP port nobody listens on right now (0 when none could be found). Another process
// may take it before it is bound, so callers retry on failure.
int free_loopback_port();

// The body of a plain HTTP/1.0 GET to 127.0.0.1:port (headers included), "" when nothing answered
// within about `timeout`.
std::string loopback_http_get(int port, const std::string& path, std::chrono::milliseconds timeout);

}  // namespace meridian
