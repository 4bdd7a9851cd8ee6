#pragma once
// Runs a program (no shell) and captures its exit status, stdout and stderr, within a wall-clock
// bound: a child still running at the deadline is killed with SIGKILL and reaped, never left behind.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

extern char** environ;

namespace meridian::testing {

struct ProcessResult {
  int exit_code = -1;  // the exit status when the child exited; -1 when it was killed by a signal
  int signal = 0;      // the signal that ended it, else 0
  bool timed_out = false;
  std::string out, err;

  // For failure messages: everything about the run on a few lines.
  std::string describe() const {
    std::string s = "exit code " + std::to_string(exit_code);
    if (signal) s += ", signal " + std::to_string(signal);
    if (timed_out) s += " (timed out and killed)";
    return s + "\n--- stdout ---\n" + out + "--- stderr ---\n" + err + "---";
  }
};

struct ProcessOptions {
  std::filesystem::path cwd;  // empty: the caller's
  std::chrono::milliseconds timeout{60'000};
  std::vector<std::string> env;  // "NAME=value" entries added to (or replacing in) the caller's environment
};

namespace detail {

inline void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// The caller's environment with `extra` on top, as owned strings.
inline std::vector<std::string> merged_environment(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& x : extra)
      if (x.substr(0, x.find('=')) == name) replaced = true;
    if (!replaced) env.push_back(entry);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

}  // namespace detail

// argv[0] is the program's path (not searched in PATH). Throws std::runtime_error when the child
// cannot be started; a program that cannot be executed exits with 127 and says why on stderr.
inline ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {}) {
  if (argv.empty()) throw std::runtime_error("run_process: empty argv");
  // Everything the child needs is built before fork: between fork and exec only async-signal-safe calls.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::vector<std::string> env_strings = detail::merged_environment(options.env);
  std::vector<char*> envp;
  for (const auto& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const std::string cwd = options.cwd.string();

  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int e = errno;
    for (int* fd : {&out_pipe[0], &out_pipe[1], &err_pipe[0], &err_pipe[1]}) detail::close_fd(*fd);
    throw std::runtime_error(std::string("run_process: pipe: ") + std::strerror(e));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    for (int* fd : {&out_pipe[0], &out_pipe[1], &err_pipe[0], &err_pipe[1]}) detail::close_fd(*fd);
    throw std::runtime_error(std::string("run_process: fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) {
      static const char msg[] = "run_process: chdir failed\n";
      [[maybe_unused]] auto n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
      ::_exit(127);
    }
    ::execve(args[0], args.data(), envp.data());
    static const char msg[] = "run_process: execve failed\n";
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(127);
  }
  detail::close_fd(out_pipe[1]);
  detail::close_fd(err_pipe[1]);

  ProcessResult result;
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  int fds[2] = {out_pipe[0], err_pipe[0]};
  std::string* sinks[2] = {&result.out, &result.err};
  while (fds[0] >= 0 || fds[1] >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      break;
    }
    pollfd polls[2];
    nfds_t n = 0;
    int which[2];
    for (int i = 0; i < 2; ++i)
      if (fds[i] >= 0) {
        polls[n] = {fds[i], POLLIN, 0};
        which[n++] = i;
      }
    const int ready = ::poll(polls, n, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) break;
    for (nfds_t k = 0; ready > 0 && k < n; ++k) {
      if (!(polls[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      const ssize_t got = ::read(fds[which[k]], buf, sizeof buf);
      if (got > 0) sinks[which[k]]->append(buf, static_cast<std::size_t>(got));
      else if (got == 0 || errno != EINTR) detail::close_fd(fds[which[k]]);
    }
  }
  detail::close_fd(fds[0]);
  detail::close_fd(fds[1]);

  if (result.timed_out) ::kill(pid, SIGKILL);  // not reaped yet, so pid is still our child
  // Both pipes closed means the child (or a grandchild holding them) is done writing; it may still
  // be running, so the wait is bounded by the deadline too.
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, result.timed_out ? 0 : WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw std::runtime_error(std::string("run_process: waitpid: ") + std::strerror(errno));
    if (std::chrono::steady_clock::now() >= deadline) {
      result.timed_out = true;
      ::kill(pid, SIGKILL);
      continue;
    }
    ::usleep(1000);  // the pipes are closed; the exit is imminent
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

}  // namespace meridian::testing
