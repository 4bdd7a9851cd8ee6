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

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include "core/io/secret_file.hpp"
#include "core/util/error.hpp"
#include "sites/keys/certificates.hpp"

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
  status_ = r > 0 ? decode(status) : ExitStatus{127, 0, {}};  // ECHILD: count it as dead rather than wait forever
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
  status_ = r > 0 ? decode(status) : ExitStatus{127, 0, {}};
  return *status_;
}

void stop_children(const std::vector<LoggedChild*>& children, std::chrono::milliseconds grace,
                   const BlockedStopSignals* hurry) {
  for (auto* c : children)
    if (c) c->signal(SIGTERM);
  const auto deadline = Clock::now() + grace;
  while (Clock::now() < deadline) {
    bool any = false;
    for (auto* c : children)
      if (c && !c->poll()) any = true;
    if (!any) break;
    if (hurry) {
      if (hurry->wait(std::chrono::milliseconds(20))) break;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
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

EtcdTls write_loopback_tls(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::remove(dir / "ca.key", ec);  // throwaway: a new CA each time
  make_private_directory(dir);
  write_certificate_authority(dir, "meridian loopback");
  write_certificate(dir, dir / "etcd.crt", dir / "etcd.key", {"127.0.0.1", "localhost"});
  return {dir / "ca.crt", dir / "etcd.crt", dir / "etcd.key"};
}

EtcdMember::EtcdMember(const std::filesystem::path& run_dir, std::optional<EtcdTls> tls, const std::string& binary)
    : binary_(binary) {
  spec_.tls = std::move(tls);
  spec_.data_dir = run_dir / "etcd";
  spec_.log = run_dir / "etcd.log";
  if (::access(binary.c_str(), X_OK) != 0)
    throw make_error(ErrorKind::Io, "cannot run ", binary, " (", std::strerror(errno),
                     "): install etcd (Debian: etcd-server), or name an etcd cluster in [control] endpoints");
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  if (ec) throw make_error(ErrorKind::Io, "cannot create ", run_dir.string(), ": ", ec.message());
  std::ofstream(spec_.log, std::ios::trunc);  // this launch's log only
  const auto deadline = Clock::now() + std::chrono::seconds(15);
  for (int attempt = 0; attempt < 5 && Clock::now() < deadline; ++attempt)
    if (start_once(attempt, deadline)) return;
  throw make_error(ErrorKind::Io, "the local etcd member (", binary, ") did not become healthy within 15 s; see ",
                   spec_.log.string());
}

EtcdMember::EtcdMember(Spec spec, const std::string& binary) : spec_(std::move(spec)), binary_(binary) {
  if (::access(binary.c_str(), X_OK) != 0)
    throw make_error(ErrorKind::Io, "cannot run ", binary, " (", std::strerror(errno), ")");
  spawn("new", "--- etcd member " + spec_.name + " starts");
}

EtcdMember::~EtcdMember() { stop(); }

pid_t EtcdMember::pid() { return running() ? child_->pid() : -1; }

bool EtcdMember::running() { return child_ && !child_->poll(); }

void EtcdMember::signal(int sig) {
  if (running()) child_->signal(sig);
}

void EtcdMember::pause() {
  if (!running()) return;
  const pid_t pid = child_->pid();
  child_->signal(SIGSTOP);
  // kill() returns before the signal has stopped every thread; a member that still answers a
  // heartbeat or two after pause() returned would make a test of "no majority" lie.
  const auto task_dir = std::filesystem::path("/proc") / std::to_string(pid) / "task";
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  for (;;) {
    bool all = true;
    std::error_code ec;
    for (const auto& task : std::filesystem::directory_iterator(task_dir, ec)) {
      std::ifstream in(task.path() / "stat");
      std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const auto close = stat.rfind(')');  // "pid (comm) S ...": the state follows the command
      if (close == std::string::npos || close + 2 >= stat.size() || (stat[close + 2] != 'T' && stat[close + 2] != 't'))
        all = false;
    }
    if (ec || all || Clock::now() > deadline) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void EtcdMember::kill() {
  if (child_) child_->kill_and_reap();
}

void EtcdMember::stop() {
  if (!running()) return;
  child_->signal(SIGCONT);  // a paused member would hold SIGTERM pending until the SIGKILL
  stop_children({&*child_}, std::chrono::seconds(5));
}

void EtcdMember::restart() {
  if (running()) throw make_error(ErrorKind::Io, "etcd member ", spec_.name, " still runs (pid ", child_->pid(), ")");
  // etcd keeps a member's identity and raft log in <data dir>/member/{snap,wal}.
  std::error_code ec;
  if (!std::filesystem::is_directory(spec_.data_dir / "member" / "wal", ec))
    throw make_error(ErrorKind::Io, "etcd member ", spec_.name, ": ", spec_.data_dir.string(),
                     " holds no member state to restart from; remove the member from its cluster and add it anew");
  // A data dir that holds a member makes etcd ignore the --initial-cluster* flags; "existing" says
  // what this start is, should that ever change.
  spawn("existing", "--- etcd member " + spec_.name + " restarts");
}

void EtcdMember::spawn(const std::string& state, const std::string& header) {
  child_.reset();
  const std::string client = endpoint();
  const std::string peer = peer_url();
  const std::string cluster = spec_.initial_cluster.empty() ? spec_.name + "=" + peer : spec_.initial_cluster;
  std::vector<std::string> argv{binary_, "--name", spec_.name, "--data-dir", spec_.data_dir.string(),
                                "--listen-client-urls", client, "--advertise-client-urls", client,
                                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                                "--initial-cluster", cluster, "--initial-cluster-state", state,
                                "--heartbeat-interval", std::to_string(spec_.heartbeat_ms),
                                "--election-timeout", std::to_string(spec_.election_ms),
                                "--logger", "zap", "--log-level", "warn"};
  for (auto& flag : tls_flags()) argv.push_back(std::move(flag));
  child_.emplace(argv, child_environment({}), spec_.log, header + ", client " + client + ", peer " + peer + " ---");
}

std::vector<std::string> EtcdMember::tls_flags() const {
  if (!spec_.tls) return {};
  const auto& t = *spec_.tls;
  return {"--cert-file", t.cert_file.string(), "--key-file", t.key_file.string(), "--trusted-ca-file",
          t.ca_file.string(), "--client-cert-auth",
          "--peer-cert-file", t.cert_file.string(), "--peer-key-file", t.key_file.string(), "--peer-trusted-ca-file",
          t.ca_file.string(), "--peer-client-cert-auth",
          "--listen-metrics-urls", "http://127.0.0.1:" + std::to_string(spec_.metrics_port),
          // meridian's etcd passwords are 32 random bytes: bcrypt's default cost (10) defends weak
          // passwords, and costs ~0.1 s of CPU per authentication, seconds on a loaded machine.
          "--bcrypt-cost", "4"};
}

bool EtcdMember::healthy(std::chrono::milliseconds timeout) {
  const int port = spec_.tls ? spec_.metrics_port : spec_.client_port;
  return loopback_http_get(port, "/health", timeout).find("\"health\":\"true\"") != std::string::npos;
}

bool EtcdMember::wait_healthy(Clock::time_point deadline) {
  while (Clock::now() < deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (healthy(std::clamp(left, std::chrono::milliseconds(1), std::chrono::milliseconds(500)))) return true;
    if (!running()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

bool EtcdMember::start_once(int attempt, Clock::time_point deadline) {
  child_.reset();
  std::error_code ec;
  std::filesystem::remove_all(spec_.data_dir, ec);
  if (ec)
    throw make_error(ErrorKind::Io, "cannot remove the old etcd data in ", spec_.data_dir.string(), ": ", ec.message());
  spec_.client_port = free_loopback_port();
  spec_.peer_port = free_loopback_port();
  spec_.metrics_port = spec_.tls ? free_loopback_port() : 0;
  const std::set<int> ports{0, spec_.client_port, spec_.peer_port, spec_.tls ? spec_.metrics_port : 0};
  if (ports.size() != (spec_.tls ? 4u : 3u)) return false;  // each one found, and no two alike
  spawn("new", "--- meridian launch: etcd attempt " + std::to_string(attempt + 1));
  if (wait_healthy(deadline)) return true;  // false: exited (most likely a port was taken in between) or too slow
  child_->kill_and_reap();
  return false;
}

LocalEtcdCluster::LocalEtcdCluster(const std::filesystem::path& dir, int size, const std::string& binary) {
  MERIDIAN_CHECK(size >= 1, "size=", size);
  if (::access(binary.c_str(), X_OK) != 0)
    throw make_error(ErrorKind::Io, "cannot run ", binary, " (", std::strerror(errno), "): install etcd (Debian: etcd-server)");
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  for (int attempt = 0; attempt < 4 && Clock::now() < deadline; ++attempt)
    if (start_once(dir, size, binary, attempt, deadline)) return;
  stop();
  throw make_error(ErrorKind::Io, "a local etcd cluster of ", size, " members (", binary,
                   ") did not become healthy within 20 s; see the logs in ", dir.string());
}

LocalEtcdCluster::~LocalEtcdCluster() { stop(); }

std::vector<std::string> LocalEtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (const auto& m : members_) out.push_back(m->endpoint());
  return out;
}

void LocalEtcdCluster::stop() {
  // One after the other: a leader told to stop hands its leadership to a follower first, and
  // waits out its whole grace when every follower is stopping too (~20 ms each this way).
  for (auto& m : members_) m->resume();
  for (auto& m : members_) m->stop();
}

bool LocalEtcdCluster::start_once(const std::filesystem::path& dir, int size, const std::string& binary, int attempt,
                                  Clock::time_point deadline) {
  members_.clear();  // an earlier attempt's members, killed and reaped
  std::set<int> ports;
  std::vector<EtcdMember::Spec> specs(static_cast<std::size_t>(size));
  std::string cluster;
  for (int i = 0; i < size; ++i) {
    auto& s = specs[static_cast<std::size_t>(i)];
    s.name = detail::concat("m", i);  // not "m" + std::to_string(i): a false -Wrestrict in g++ 12
    s.data_dir = dir / s.name;
    s.log = dir / (s.name + ".log");
    s.client_port = free_loopback_port();
    s.peer_port = free_loopback_port();
    s.heartbeat_ms = 25;
    s.election_ms = 250;
    if (s.client_port == 0 || s.peer_port == 0 || !ports.insert(s.client_port).second || !ports.insert(s.peer_port).second)
      return false;
    cluster += (i ? "," : "") + s.name + "=http://127.0.0.1:" + std::to_string(s.peer_port);
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw make_error(ErrorKind::Io, "cannot create ", dir.string(), ": ", ec.message());
  for (auto& s : specs) {
    s.initial_cluster = cluster;
    std::filesystem::remove_all(s.data_dir, ec);  // etcd creates it, with the permissions it wants
    if (ec) throw make_error(ErrorKind::Io, "cannot remove ", s.data_dir.string(), ": ", ec.message());
    if (attempt == 0) std::ofstream(s.log, std::ios::trunc);
  }
  for (auto& s : specs) members_.push_back(std::make_unique<EtcdMember>(s, binary));
  for (auto& m : members_)
    if (!m->wait_healthy(deadline)) {
      for (auto& k : members_) k->kill();
      return false;
    }
  return true;
}

}  // namespace meridian
