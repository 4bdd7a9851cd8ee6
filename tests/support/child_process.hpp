#pragma once
// A child process that runs while the test acts on it: started with fork/exec (output to a file),
// waited for with a bound, and killed and reaped if the test ends first.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace meridian::testing {

class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& argv, const std::filesystem::path& output) {
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      ::setpgid(0, 0);  // its own process group, so cleanup reaches its children too
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      std::_Exit(127);
    }
  }
  ~ChildProcess() {
    if (pid_ > 0 && !status_) {
      ::kill(-pid_, SIGKILL);
      ::kill(pid_, SIGKILL);
      int st;
      ::waitpid(pid_, &st, 0);
    }
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  // The exit code, or nullopt if it still runs after `limit` (polled; the child is not waited on forever).
  std::optional<int> wait_for(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!status_) {
      int st;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return status_;
  }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// A file's whole contents; empty when it cannot be read.
inline std::string file_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The last `bytes` of a child's output file, for a failing check to show what the child said.
inline std::string tail_of(const std::filesystem::path& output, std::size_t bytes = 3000) {
  const std::string all = file_text(output);
  return all.size() > bytes ? all.substr(all.size() - bytes) : all;
}

// Pids of running processes whose command line contains every one of `needles`.
inline std::vector<pid_t> find_processes(const std::vector<std::string>& needles) {
  std::vector<pid_t> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const auto name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = file_text(entry.path() / "cmdline");
    for (auto& ch : cmd)
      if (ch == '\0') ch = ' ';
    bool all = !cmd.empty();
    for (const auto& n : needles) all = all && cmd.find(n) != std::string::npos;
    if (all) found.push_back(static_cast<pid_t>(std::stoi(name)));
  }
  return found;
}

}  // namespace meridian::testing
