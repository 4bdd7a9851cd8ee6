#include "sites/launch/etcd_member.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include "core/util/error.hpp"

extern char** environ;

namespace meridian {

namespace {

using Clock = std::chrono::steady_clock;

ExitStatus decode(int status) {
  ExitStatus s;
  if (WIFEXITED(status)) s.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) s.signal = WTERMSIG(status);
  return s;
}

}  // namespace

LoggedChild::LoggedChild(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         const std::filesystem::path& log, const std::string& header) {
  MERIDIAN_CHECK(!argv.empty(), "empty argv");
  // Everything the child needs is built before fork: between fork and exec only async-signal-safe calls.
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw make_error(ErrorKind::Io, "cannot open ", log.string(), ": ", std::strerror(errno));
  const std::string line = header + "\n";
  [[maybe_unused]] auto written = ::write(fd, line.data(), line.size());
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) {
    const int e = errno;
    ::close(fd);
    throw make_error(ErrorKind::Io, "cannot start ", argv[0], ": fork: ", std::strerror(e));
  }
  if (pid_ == 0) {
    ::setpgid(0, 0);
    // SIGTERM rather than SIGKILL: a site agent then still terminates and reaps its replicas.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);  // the launcher died before the line above took effect
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::close_range(3, ~0U, 0);
    // The launcher blocks SIGINT/SIGTERM to take them with sigtimedwait; its children must not inherit that.
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(args[0], args.data(), envp.data());
    static const char msg[] = "meridian launch: execve failed\n";
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(127);
  }
  ::close(fd);
}

LoggedChild::~LoggedChild() {
  if (running()) kill_and_reap();
}

void LoggedChild::signal(int sig) {
  if (running()) ::kill(pid_, sig);
}

std::optional<ExitStatus> LoggedChild::poll() {
  if (status_) return status_;
  int status = 0;
  pid_t r;
  do r = ::waitpid(pid_, &status, WNOHANG);
  while (r < 0 && errno == EINTR);
  if (r == 0) return std::nullopt;
  status_ = r > 0 ? decode(status) : ExitStatus{127, 0};  // ECHILD: count it as dead rather than wait forever
  // Whatever it left in its process group (a site's replicas, when the agent crashed) goes with it.
  ::kill(-pid_, SIGKILL);
  return status_;
}

ExitStatus LoggedChild::kill_and_reap() {
  if (status_) return *status_;
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);  // in case it had not reached its setpgid yet
  int status = 0;
  pid_t r;
  do r = ::waitpid(pid_, &status, 0);
  while (r < 0 && errno == EINTR);
  status_ = r > 0 ? decode(status) : ExitStatus{127, 0};
  return *status_;
}

void stop_children(const std::vector<LoggedChild*>& children, std::chrono::milliseconds grace, const sigset_t* hurry) {
  for (auto* c : children)
    if (c) c->signal(SIGTERM);
  const auto deadline = Clock::now() + grace;
  while (Clock::now() < deadline) {
    bool any = false;
    for (auto* c : children)
      if (c && !c->poll()) any = true;
    if (!any) break;
    const timespec pause{0, 20'000'000};
    if (hurry) {
      if (::sigtimedwait(hurry, nullptr, &pause) > 0) break;
    } else {
      ::nanosleep(&pause, nullptr);
    }
  }
  for (auto* c : children)
    if (c && !c->poll()) c->kill_and_reap();
}

std::vector<std::string> child_environment(const std::vector<std::string>& set) {
  std::set<std::string> names;
  for (const auto& s : set) names.insert(s.substr(0, s.find('=')));
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry = *e;
    if (!names.count(entry.substr(0, entry.find('=')))) env.push_back(entry);
  }
  env.insert(env.end(), set.begin(), set.end());
  return env;
}

std::string tail_lines(const std::filesystem::path& file, int lines) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return {};
  // A site log can grow large; its last lines live in the last few kilobytes.
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::int64_t>(in.tellg());
  const std::int64_t start = std::max<std::int64_t>(0, size - 64 * 1024);
  in.seekg(start);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> all;
  std::size_t begin = 0;
  while (begin < text.size()) {
    const auto end = std::min(text.find('\n', begin), text.size());
    all.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  std::string out;
  for (std::size_t i = all.size() > static_cast<std::size_t>(lines) ? all.size() - lines : 0; i < all.size(); ++i)
    out += all[i] + "\n";
  return out;
}

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

std::string loopback_http_get(int port, const std::string& path, std::chrono::milliseconds timeout) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return {};
  timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

EtcdMember::EtcdMember(const std::filesystem::path& run_dir, const std::string& binary)
    : data_dir_(run_dir / "etcd"), log_(run_dir / "etcd.log") {
  if (::access(binary.c_str(), X_OK) != 0)
    throw make_error(ErrorKind::Io, "cannot run ", binary, " (", std::strerror(errno),
                     "): install etcd (Debian: etcd-server), or name an etcd cluster in [control] endpoints");
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  if (ec) throw make_error(ErrorKind::Io, "cannot create ", run_dir.string(), ": ", ec.message());
  std::ofstream(log_, std::ios::trunc);  // this launch's log only
  const auto deadline = Clock::now() + std::chrono::seconds(15);
  for (int attempt = 0; attempt < 5 && Clock::now() < deadline; ++attempt)
    if (start_once(binary, attempt, deadline)) return;
  throw make_error(ErrorKind::Io, "the local etcd member (", binary, ") did not become healthy within 15 s; see ",
                   log_.string());
}

EtcdMember::~EtcdMember() { stop(); }

void EtcdMember::stop() {
  if (child_ && child_->running()) stop_children({&*child_}, std::chrono::seconds(5));
}

bool EtcdMember::start_once(const std::string& binary, int attempt, Clock::time_point deadline) {
  child_.reset();
  std::error_code ec;
  std::filesystem::remove_all(data_dir_, ec);
  if (ec) throw make_error(ErrorKind::Io, "cannot remove the old etcd data in ", data_dir_.string(), ": ", ec.message());
  client_port_ = free_loopback_port();
  const int peer_port = free_loopback_port();
  if (client_port_ == 0 || peer_port == 0 || client_port_ == peer_port) return false;
  const std::string client = endpoint();
  const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port);
  // Short raft timers: a lone member elects itself after one election timeout, and a loopback
  // member has no network delay for the defaults (100 ms / 1 s) to absorb.
  child_.emplace(std::vector<std::string>{binary, "--name", "local", "--data-dir", data_dir_.string(),
                                          "--listen-client-urls", client, "--advertise-client-urls", client,
                                          "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                                          "--initial-cluster", "local=" + peer, "--initial-cluster-state", "new",
                                          "--heartbeat-interval", "10", "--election-timeout", "100",
                                          "--logger", "zap", "--log-level", "warn"},
                 child_environment({}), log_,
                 "--- meridian launch: etcd attempt " + std::to_string(attempt + 1) + ", client " + client +
                     ", peer " + peer + " ---");
  while (Clock::now() < deadline) {
    if (loopback_http_get(client_port_, "/health", std::chrono::milliseconds(500)).find("\"health\":\"true\"") !=
        std::string::npos)
      return true;
    if (child_->poll()) return false;  // exited: most likely a port was taken in between; try others
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  child_->kill_and_reap();
  return false;
}

}  // namespace meridian
