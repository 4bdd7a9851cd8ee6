#pragma once
// The site agent's replica processes, behind a small interface so the agent's logic runs in tests
// against fake processes and a fake clock. The real launcher forks and execs a program per slot.
#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/util/error.hpp"

namespace meridian {

struct ExitStatus {
  int code = 0;    // exit status when it exited, else 0
  int signal = 0;  // the signal that ended it, else 0
  // A failed process's own account: the last "meridian: ..." error line of its log, if any.
  std::string cause;
  bool success() const { return signal == 0 && code == 0; }
  // The kind of error it ended with when that is the input's own fault (error.hpp's exit codes):
  // starting it again would fail the same way.
  std::optional<ErrorKind> permanent() const;
};

// "exit code 3" / "exit code 65 (data error)" / "signal 9 (Killed)"
std::string describe(const ExitStatus& s);

// The last line of `log` that a meridian command printed on failing ("meridian: <kind> error: ..."
// or "meridian: internal error ..."), read from the file's final 64 KiB; empty when there is none.
std::string last_error_line(const std::filesystem::path& log);

class Launcher {
 public:
  virtual ~Launcher() = default;
  // Starts slot `id`'s process; any slot has at most one at a time. Error(Io) when it cannot start.
  virtual void start(int id, int incarnation) = 0;
  virtual void signal(int id, int sig) = 0;  // no-op when the slot has no live process
  // Reaps the slot's process without waiting: its status once it ended (reported once), else nothing.
  virtual std::optional<ExitStatus> poll(int id) = 0;
};

// fork/exec of argv_for(id); stdout and stderr appended to <log_dir>/replica-<id>.log. Children get
// SIGKILL when the agent dies, so a crashed agent leaves no replica training alone. The destructor
// kills and reaps whatever still runs.
class ProcessLauncher final : public Launcher {
 public:
  ProcessLauncher(std::function<std::vector<std::string>(int id)> argv_for, std::filesystem::path log_dir);
  ~ProcessLauncher() override;
  ProcessLauncher(const ProcessLauncher&) = delete;
  ProcessLauncher& operator=(const ProcessLauncher&) = delete;

  void start(int id, int incarnation) override;
  void signal(int id, int sig) override;
  std::optional<ExitStatus> poll(int id) override;
  bool any_running() const { return !pids_.empty(); }

 private:
  std::function<std::vector<std::string>(int)> argv_for_;
  std::filesystem::path log_dir_;
  std::map<int, pid_t> pids_;  // live (unreaped) children by slot
};

class Store;

// Replicas started by a cluster launcher (torchrun-style RANK/WORLD_SIZE, or SLURM): nothing to
// start or kill. A replica counts as ended when it marks done/<id> in the store (exit 0) or when
// the agent gives up on it (evicted: reported as SIGKILL). A restart of the slot starts nothing
// either: it admits the slot's next process to announce itself, one the cluster launcher started
// again or the same one back from a partition or a pause (which waits, unlisted, for a generation
// that lists it), with a first-beat allowance and max_restarts as for any restart.
class AttachedLauncher final : public Launcher {
 public:
  explicit AttachedLauncher(Store& store) : store_(store) {}
  void start(int id, int incarnation) override;
  void signal(int id, int sig) override;
  std::optional<ExitStatus> poll(int id) override;

 private:
  Store& store_;
  std::map<int, bool> gone_;  // by slot: evicted, exit not yet reported
  std::map<int, bool> live_;  // by slot: started and not yet reported ended
};

}  // namespace meridian
