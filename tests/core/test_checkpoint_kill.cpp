// Crash safety of CheckpointStore against real process death: a forked child saves large
// checkpoints in a loop through the real store and posix_env(), the parent SIGKILLs it at varied
// moments (many of them in the middle of a write) and then, as a restarted process would, opens
// the store and checks that the newest checkpoint loads, verifies and is exactly the last one whose
// save completed.
//
// What this proves and what it does not: after SIGKILL the kernel keeps everything the process had
// written (it sits in the page cache and reaches the disk later), so this test proves atomicity
// against process death -- a reader never sees a half-written file under a checkpoint name and the
// previous checkpoint stays loadable. It says nothing about power loss, where unsynced data is
// lost; that is what test_checkpoint.cpp's FaultInjectionEnv crash test covers.
#include <doctest/doctest.h>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/checkpoint/checkpoint.hpp"
#include "core/checkpoint/store.hpp"
#include "core/io/env.hpp"
#include "core/util/error.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// 2 records of 4 MiB: large enough that a save (write, fsync, rename) takes a while, so that a kill
// right after the child announces a write usually lands inside it.
constexpr std::size_t kBlocks = 2;
constexpr std::size_t kBlockWords = (4u << 20) / sizeof(std::uint64_t);
constexpr int kKeepLast = 2;

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Word j of block b of the checkpoint for `step`: every byte depends on the step.
void fill_block(std::int64_t step, std::size_t block, std::vector<std::uint64_t>& words) {
  words.resize(kBlockWords);
  const std::uint64_t base = splitmix64(static_cast<std::uint64_t>(step) * 1000003u + block) << 20;
  for (std::size_t j = 0; j < kBlockWords; ++j) words[j] = splitmix64(base + j);
}

Checkpoint make_checkpoint(std::int64_t step) {
  Checkpoint c;
  c.put_value<std::int64_t>("step", step);
  std::vector<std::uint64_t> words;
  for (std::size_t b = 0; b < kBlocks; ++b) {
    fill_block(step, b, words);
    c.put_pod<std::uint64_t>("block." + std::to_string(b), words);
  }
  return c;
}

// Empty when `c` is exactly make_checkpoint(step), else what differs.
std::string content_mismatch(const Checkpoint& c, std::int64_t step) {
  std::vector<std::string> names{"step"};
  for (std::size_t b = 0; b < kBlocks; ++b) names.push_back("block." + std::to_string(b));
  if (c.names() != names) return "unexpected record names";
  if (c.get_value<std::int64_t>("step") != step) {
    return "record step holds " + std::to_string(c.get_value<std::int64_t>("step"));
  }
  std::vector<std::uint64_t> words;
  for (std::size_t b = 0; b < kBlocks; ++b) {
    fill_block(step, b, words);
    const auto got = c.get("block." + std::to_string(b));
    if (got.size() != words.size() * sizeof(std::uint64_t) || std::memcmp(got.data(), words.data(), got.size()) != 0) {
      return "block." + std::to_string(b) + " differs";
    }
  }
  return {};
}

// The child's side of the pipe: "W <step>" just before save(), "S <step>" once it returned.
void say(int fd, char what, std::int64_t step) {
  char line[64];
  const int n = std::snprintf(line, sizeof line, "%c %lld\n", what, static_cast<long long>(step));
  [[maybe_unused]] const auto w = ::write(fd, line, static_cast<std::size_t>(n));  // < PIPE_BUF: atomic
}

[[noreturn]] void child_main(int fd, const fs::path& dir, std::int64_t first_step) {
  ::alarm(30);  // a child the parent somehow never kills dies on its own
  try {
    CheckpointStore store(posix_env(), dir, kKeepLast);
    for (std::int64_t step = first_step; step < first_step + 1000; ++step) {
      const Checkpoint c = make_checkpoint(step);  // built first: the announcement is right before the write
      say(fd, 'W', step);
      store.save(step, c);
      say(fd, 'S', step);
    }
  } catch (const std::exception& e) {
    const std::string line = std::string("E ") + e.what() + "\n";
    [[maybe_unused]] const auto w = ::write(fd, line.data(), line.size());
    ::_exit(3);
  }
  ::_exit(0);
}

// Kills and reaps the child if the test leaves early (a failed REQUIRE).
struct ChildGuard {
  pid_t pid = -1;
  int fd = -1;
  ~ChildGuard() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      int st;
      ::waitpid(pid, &st, 0);
    }
    if (fd >= 0) ::close(fd);
  }
};

struct ChildReport {
  std::vector<std::int64_t> announced, saved;
  std::string error;
  std::string pending;  // a partial line

  void consume(const char* data, std::size_t n) {
    pending.append(data, n);
    for (std::size_t nl; (nl = pending.find('\n')) != std::string::npos; pending.erase(0, nl + 1)) {
      const std::string line = pending.substr(0, nl);
      if (line.size() > 2 && line[0] == 'W') announced.push_back(std::stoll(line.substr(2)));
      else if (line.size() > 2 && line[0] == 'S') saved.push_back(std::stoll(line.substr(2)));
      else error += line + "\n";
    }
  }
};

// Reads what is available on `fd` within `timeout_ms` (-1: until EOF). False on EOF.
bool read_some(int fd, ChildReport& report, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  const int ready = ::poll(&p, 1, timeout_ms);
  if (ready <= 0) return true;
  char buf[4096];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  if (n > 0) report.consume(buf, static_cast<std::size_t>(n));
  return n > 0 || (n < 0 && errno == EINTR);
}

// One kill: after the child has announced `after_writes` writes (0: counted from the fork), wait
// `delay_us` more, then SIGKILL.
struct KillAt {
  int after_writes;
  int delay_us;
};

bool contains(const std::string& s, std::string_view needle) { return s.find(needle) != std::string::npos; }

std::optional<std::int64_t> tmp_step(const std::string& name) {
  constexpr std::string_view prefix = "ckpt-", suffix = ".mrdn.tmp";
  if (!name.starts_with(prefix) || !name.ends_with(suffix)) return std::nullopt;
  return std::stoll(name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()));
}

}  // namespace

TEST_CASE("kill -9 during checkpoint saves: the last completed checkpoint always loads") {
  // Deterministic: a kill right after an announcement (usually mid-write), a little later (the
  // write, the fsync, the rename or the prune), or a fixed time after the fork (anywhere,
  // including while the child builds the data or before its first write).
  const std::vector<KillAt> schedule{
      {1, 300},  {1, 2000},  {2, 1000},  {1, 10000}, {0, 5000},  {2, 5000}, {1, 500},
      {0, 30000}, {1, 20000}, {2, 300},  {3, 3000},  {0, 1000},  {1, 0},    {1, 40000},
      {0, 60000}, {2, 15000}, {1, 1000}, {1, 7000},  {0, 90000}, {2, 0}};

  TempDir tmp("ckpt-kill");
  const fs::path dir = tmp / "checkpoints";
  const auto started = std::chrono::steady_clock::now();

  std::int64_t next_step = 1;
  std::optional<std::int64_t> durable;  // the step loaded after the previous kill
  int tmp_left = 0, new_unreported = 0, before_write = 0, between_saves = 0, saves_total = 0, tmps_cleaned = 0;

  for (std::size_t round = 0; round < schedule.size(); ++round) {
    const KillAt kill_at = schedule[round];
    CAPTURE(round);
    CAPTURE(kill_at.after_writes);
    CAPTURE(kill_at.delay_us);

    // Leftover temp files from earlier kills, which the child's first completed save must remove.
    std::vector<std::string> old_tmps;
    if (fs::exists(dir)) {
      for (const auto& name : posix_env().list_dir(dir))
        if (tmp_step(name)) old_tmps.push_back(name);
    }

    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(fds[0]);
      child_main(fds[1], dir, next_step);
    }
    ::close(fds[1]);
    ChildGuard guard{pid, fds[0]};
    ChildReport report;

    const auto forked = std::chrono::steady_clock::now();
    bool open = true;
    while (open && report.announced.size() < static_cast<std::size_t>(kill_at.after_writes)) {
      open = read_some(fds[0], report, 1000);
      REQUIRE_MESSAGE(std::chrono::steady_clock::now() - forked < std::chrono::seconds(20),
                      "the child announced no write in 20 s");
    }
    REQUIRE_MESSAGE(report.error.empty(), report.error);
    if (kill_at.delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(kill_at.delay_us));
    ::kill(pid, SIGKILL);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    guard.pid = -1;
    // Everything the child said before it died is in the pipe; read it to EOF.
    while (read_some(fds[0], report, -1)) {
    }
    REQUIRE_MESSAGE(report.error.empty(), report.error);
    REQUIRE_MESSAGE((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL), "child status ", status);

    const std::optional<std::int64_t> writing =
        report.announced.empty() ? std::nullopt : std::optional<std::int64_t>(report.announced.back());
    const std::optional<std::int64_t> last_saved =
        report.saved.empty() ? durable : std::optional<std::int64_t>(report.saved.back());
    saves_total += static_cast<int>(report.saved.size());
    CAPTURE(writing.value_or(-1));
    CAPTURE(last_saved.value_or(-1));
    if (writing) next_step = *writing + 1;

    // Every file under a checkpoint name is complete and holds its own step: never a torn file.
    std::vector<std::string> tmps;
    const std::vector<std::string> names = fs::exists(dir) ? posix_env().list_dir(dir) : std::vector<std::string>{};
    for (const auto& name : names) {
      if (tmp_step(name)) {
        tmps.push_back(name);
        continue;
      }
      if (!name.starts_with("ckpt-")) continue;
      const std::int64_t step = std::stoll(name.substr(5, 10));
      CAPTURE(name);
      Checkpoint c;
      REQUIRE_NOTHROW(c = decode_checkpoint(posix_env().read_all(dir / name), name));
      CHECK(content_mismatch(c, step) == "");
    }
    // A temp file is the interrupted write's own, or one an earlier kill left and no save has
    // removed since.
    for (const auto& name : tmps) {
      CAPTURE(name);
      const bool own = writing && tmp_step(name) == *writing;
      const bool older = std::find(old_tmps.begin(), old_tmps.end(), name) != old_tmps.end();
      CHECK((own || (older && report.saved.empty())));
    }

    // A restarted process: a fresh store over the same directory.
    CheckpointStore store(posix_env(), dir, kKeepLast);
    std::vector<std::string> warnings;
    const auto loaded = store.load_latest([&](const std::string& w) { warnings.push_back(w); });
    // Where the kill landed, for the summary.
    const bool own_tmp_left =
        writing && std::any_of(tmps.begin(), tmps.end(), [&](const std::string& n) { return tmp_step(n) == *writing; });
    const bool write_unfinished = writing && (report.saved.empty() || report.saved.back() != *writing);
    const bool renamed = write_unfinished && loaded && loaded->step == *writing;
    ++(own_tmp_left ? tmp_left : renamed ? new_unreported : write_unfinished ? before_write : between_saves);

    if (!last_saved && !loaded) {
      // Killed before the first save of the whole run completed: nothing to load yet is right.
      CHECK(tmps.size() == warnings.size());
      continue;
    }
    REQUIRE(loaded.has_value());
    CAPTURE(loaded->step);
    // Exactly the newest save that completed: the last one reported, or the one being written
    // when its rename had happened before the kill. Nothing older, nothing half-written.
    const bool is_last_saved = last_saved && loaded->step == *last_saved;
    const bool is_writing = writing && loaded->step == *writing;
    CHECK((is_last_saved || is_writing));
    CHECK(content_mismatch(loaded->checkpoint, loaded->step) == "");
    CHECK(loaded->step == store.steps().back());
    // Leftover temp files are reported (and ignored); nothing else is skipped.
    REQUIRE(warnings.size() == tmps.size());
    for (std::size_t i = 0; i < tmps.size(); ++i) {
      CAPTURE(warnings[i]);
      CHECK(contains(warnings[i], tmps[i]));
      CHECK(contains(warnings[i], "unfinished"));
    }
    for (const auto& name : old_tmps) {
      if (report.saved.empty()) continue;
      CHECK_MESSAGE(!fs::exists(dir / name), name, " survived a completed save");
      ++tmps_cleaned;
    }

    durable = loaded->step;
  }

  // A save after all that cleans up every leftover and loads without a warning.
  CheckpointStore store(posix_env(), dir, kKeepLast);
  store.save(next_step, make_checkpoint(next_step));
  for (const auto& name : posix_env().list_dir(dir)) CHECK_MESSAGE(!tmp_step(name), name);
  std::vector<std::string> warnings;
  const auto loaded = store.load_latest([&](const std::string& w) { warnings.push_back(w); });
  REQUIRE(loaded.has_value());
  CHECK(loaded->step == next_step);
  CHECK(warnings.empty());

  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  MESSAGE(schedule.size(), " kills, ", saves_total, " completed saves: ", tmp_left, " mid-write (left a .tmp), ",
          new_unreported, " after the rename but before 'saved' was reported, ", before_write,
          " after the announcement but before the temp file existed, ", between_saves, " between saves or before the first write; ",
          tmps_cleaned, " leftover .tmp files removed by the next child's first save; ",
          ms.count(), " ms");
  // The point of the test is kills that interrupt a write; the schedule makes them the majority.
  CHECK(tmp_left >= 1);
}
