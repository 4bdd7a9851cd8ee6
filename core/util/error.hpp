#pragma once
// Two kinds of failure, kept apart (see docs/ARCHITECTURE.md, "Errors"):
//  * Error: expected failures caused by the outside world -- bad config, bad data, a corrupt
//    checkpoint, a disk or peer problem. Typed, carries where it happened, recoverable.
//  * InvariantError (via MERIDIAN_CHECK): a bug in meridian. Fails loudly with the operands.
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace meridian {

enum class ErrorKind {
  Config,      // a job file or --set override is wrong
  Data,        // a data file is missing, empty, too short or malformed
  Checkpoint,  // a checkpoint is truncated, corrupt or from another model
  Io,          // the file system refused an operation
  Usage,       // a command line is wrong
  Peer,        // a peer process disconnected, crashed or sent something invalid (KJ's DISCONNECTED)
  Timeout,     // a peer or a service did not answer in time
};

std::string_view to_string(ErrorKind kind);

// What a process exits with when an Error of `kind` ends it. The input's own faults (usage 2,
// config 78, data 65, checkpoint 66: the sysexits codes where one fits) are permanent: running the
// same command again fails the same way, so a supervisor reports them instead of restarting.
// Everything else (io, peer, timeout) is 1, and a broken invariant is 70 (EX_SOFTWARE).
int exit_code(ErrorKind kind);
inline constexpr int kBugExitCode = 70;
// The kind behind a permanent exit code; nullopt for any other code (restarting may help).
std::optional<ErrorKind> permanent_failure(int exit_code);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

class InvariantError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
[[noreturn]] void invariant_failed(const char* expr, const char* file, int line, const std::string& detail);
}  // namespace detail

// Builds an Error whose message is the concatenation of the arguments.
template <class... Args>
Error make_error(ErrorKind kind, const Args&... args) {
  return Error(kind, detail::concat(args...));
}

}  // namespace meridian

// MERIDIAN_CHECK(cond, "a=", a, " b=", b): an invariant of meridian itself; never for input checks.
#define MERIDIAN_CHECK(cond, ...)                                                            \
  do {                                                                                       \
    if (!(cond)) [[unlikely]]                                                                \
      ::meridian::detail::invariant_failed(#cond, __FILE__, __LINE__,                        \
                                           ::meridian::detail::concat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
