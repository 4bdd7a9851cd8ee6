#include "sites/site/process.hpp"

#include "intrasite/comm/store.hpp"
#include "intrasite/group/protocol.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <cstring>

#include "core/util/error.hpp"

namespace meridian {

std::optional<ErrorKind> ExitStatus::permanent() const {
  if (signal != 0) return std::nullopt;
  return permanent_failure(code);
}

std::string describe(const ExitStatus& s) {
  if (s.signal != 0) return "signal " + std::to_string(s.signal) + " (" + ::strsignal(s.signal) + ")";
  if (const auto kind = s.permanent(); kind && *kind != ErrorKind::Usage)
    return "exit code " + std::to_string(s.code) + " (" + std::string(to_string(*kind)) + " error)";
  return "exit code " + std::to_string(s.code);
}

std::string last_error_line(const std::filesystem::path& log) {
  constexpr std::streamoff kTail = 64 * 1024;
  std::ifstream in(log, std::ios::binary | std::ios::ate);
  if (!in) return {};
  const std::streamoff size = in.tellg();
  in.seekg(std::max<std::streamoff>(0, size - kTail));
  std::string found;
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("meridian: ")) found = line;
  return found;
}

ProcessLauncher::ProcessLauncher(std::function<std::vector<std::string>(int id)> argv_for,
                                 std::filesystem::path log_dir)
    : argv_for_(std::move(argv_for)), log_dir_(std::move(log_dir)) {}

ProcessLauncher::~ProcessLauncher() {
  for (auto& [id, pid] : pids_) ::kill(pid, SIGKILL);
  for (auto& [id, pid] : pids_) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

void ProcessLauncher::start(int id, int incarnation) {
  MERIDIAN_CHECK(!pids_.count(id), "slot ", id, " already has a process");
  const std::vector<std::string> argv = argv_for_(id);
  MERIDIAN_CHECK(!argv.empty(), "empty argv for slot ", id);
  // Everything the child needs is built before fork: between fork and exec only async-signal-safe calls.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const auto log_path = log_dir_ / ("replica-" + std::to_string(id) + ".log");
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) throw make_error(ErrorKind::Io, "cannot open ", log_path.string(), ": ", std::strerror(errno));
  // Several incarnations share the file: mark where each begins.
  const std::string header = "--- meridian site: replica " + std::to_string(id) + ", incarnation " +
                             std::to_string(incarnation) + " ---\n";
  [[maybe_unused]] auto written = ::write(log, header.data(), header.size());
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(log);
    throw make_error(ErrorKind::Io, "cannot start replica ", id, ": fork: ", std::strerror(e));
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the agent died before the line above took effect
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    ::close_range(3, ~0U, 0);  // the agent's run log and sockets are not the replica's business
    // The agent blocks nothing, but undo any mask a caller might have set: replicas must see SIGTERM.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv(args[0], args.data());
    static const char msg[] = "meridian site: execv of the replica program failed\n";
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(127);
  }
  ::close(log);
  pids_[id] = pid;
}

void ProcessLauncher::signal(int id, int sig) {
  const auto it = pids_.find(id);
  if (it != pids_.end()) ::kill(it->second, sig);
}

std::optional<ExitStatus> ProcessLauncher::poll(int id) {
  const auto it = pids_.find(id);
  if (it == pids_.end()) return std::nullopt;
  int status = 0;
  pid_t r;
  do r = ::waitpid(it->second, &status, WNOHANG);
  while (r < 0 && errno == EINTR);
  if (r == 0) return std::nullopt;
  pids_.erase(it);
  ExitStatus s;
  if (r > 0 && WIFEXITED(status)) s.code = WEXITSTATUS(status);
  if (r > 0 && WIFSIGNALED(status)) s.signal = WTERMSIG(status);
  if (r < 0) s.code = 127;  // not our child any more (ECHILD): count it as dead rather than wait forever
  if (!s.success()) s.cause = last_error_line(log_dir_ / ("replica-" + std::to_string(id) + ".log"));
  return s;
}

void AttachedLauncher::start(int id, int) { live_[id] = true; }

void AttachedLauncher::signal(int id, int sig) {
  if (sig == SIGKILL && live_[id]) gone_[id] = true;
}

std::optional<ExitStatus> AttachedLauncher::poll(int id) {
  if (!live_[id]) return std::nullopt;
  if (gone_[id]) {
    live_[id] = gone_[id] = false;
    return ExitStatus{0, SIGKILL, {}};
  }
  if (!store_.check(site_keys::done(id))) return std::nullopt;
  live_[id] = false;
  return ExitStatus{0, 0, {}};
}

}  // namespace meridian
