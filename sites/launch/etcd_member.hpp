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
#include <optional>
#include <string>
#include <vector>

#include "sites/site/process.hpp"

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
// and reap what remains. A signal in `hurry` arriving meanwhile (a second Ctrl-C) skips the rest
// of the grace. `hurry` must be blocked by the caller (it is taken with sigtimedwait).
void stop_children(const std::vector<LoggedChild*>& children, std::chrono::milliseconds grace,
                   const sigset_t* hurry = nullptr);

// The child environment: this process's environ with `set` (NAME=value) replacing or adding.
std::vector<std::string> child_environment(const std::vector<std::string>& set);

// The last `lines` lines of a text file ("" when it cannot be read).
std::string tail_lines(const std::filesystem::path& file, int lines);

// A single-member etcd on loopback for a job run on one machine. Data in <run_dir>/etcd (removed
// first: the commit log of an earlier launch would only confuse this one), log in <run_dir>/etcd.log.
class EtcdMember {
 public:
  static constexpr const char* kBinary = "/usr/bin/etcd";

  // Ready when /health answers (within ~15 s); Error(Io) naming the log file when it does not start.
  explicit EtcdMember(const std::filesystem::path& run_dir, const std::string& binary = kBinary);
  ~EtcdMember();  // stop()
  EtcdMember(const EtcdMember&) = delete;
  EtcdMember& operator=(const EtcdMember&) = delete;

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(client_port_); }
  pid_t pid() const { return child_ ? child_->pid() : -1; }
  const std::filesystem::path& log_path() const { return log_; }
  LoggedChild* child() { return child_ ? &*child_ : nullptr; }
  // SIGTERM, up to ~5 s, then SIGKILL; reaped. Idempotent.
  void stop();

 private:
  bool start_once(const std::string& binary, int attempt, std::chrono::steady_clock::time_point deadline);

  std::filesystem::path data_dir_;
  std::filesystem::path log_;
  std::optional<LoggedChild> child_;
  int client_port_ = 0;
};

// A loopback TCP port nobody listens on right now (0 when none could be found). Another process
// may take it before it is bound, so callers retry on failure.
int free_loopback_port();

// The body of a plain HTTP/1.0 GET to 127.0.0.1:port (headers included), "" when nothing answered
// within about `timeout`.
std::string loopback_http_get(int port, const std::string& path, std::chrono::milliseconds timeout);

}  // namespace meridian
